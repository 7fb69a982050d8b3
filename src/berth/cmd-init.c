/* SPDX-License-Identifier: Apache-2.0 */
/* berth init <name> [--template hello-world|python]: a new app folder from a template. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "fileio.h"
#include "log.h"
#include "macros.h"
#include "manifest.h"
#include "source-dir.h"

#define TEMPLATE_FILE_MAX (1024 * 1024)

static const char *const templates[] = {"hello-world", "python"};
/* Files whose text gets {{name}} replaced. */
static const char *const substituted[] = {".yml", ".yaml", ".json", ".md",   ".ts",
					  ".js",  ".mjs",  ".py",   ".toml", ".txt"};

static int name_valid(const char *n)
{
	if (!*n || strlen(n) > 32)
		return 0;
	for (const char *c = n; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-'))
			return 0;
	return 1;
}

static bool wants_substitution(const char *file)
{
	const char *dot = strrchr(file, '.');

	for (size_t i = 0; dot && i < ELEMENTSOF(substituted); i++)
		if (streq(dot, substituted[i]))
			return true;
	return false;
}

static char *substitute(const char *text, const char *name)
{
	size_t n = 0, len = strlen(text);
	char *out, *o;

	for (const char *p = text; (p = strstr(p, "{{name}}")); p += 8)
		n++;
	out = malloc(len + n * strlen(name) + 1);
	if (!out)
		return NULL;
	o = out;
	for (const char *p = text;;) {
		const char *hit = strstr(p, "{{name}}");

		if (!hit) {
			strcpy(o, p);
			break;
		}
		memcpy(o, p, (size_t)(hit - p));
		o += hit - p;
		strcpy(o, name);
		o += strlen(name);
		p = hit + 8;
	}
	return out;
}

static int copy_tree(const char *from, const char *to, const char *name)
{
	struct dirent **ents = NULL;
	int n, r = 0;

	if (mkdir(to, 0755) < 0)
		return -errno;
	n = scandir(from, &ents, NULL, alphasort);
	if (n < 0)
		return -errno;
	for (int i = 0; i < n; i++) {
		_cleanup_free_ char *src = NULL, *dst = NULL, *text = NULL, *out = NULL;
		const char *e = ents[i]->d_name;
		struct stat st;
		size_t size;

		if (r < 0 || streq(e, ".") || streq(e, "..") || streq(e, "node_modules"))
			goto next;
		if (asprintf(&src, "%s/%s", from, e) < 0 || asprintf(&dst, "%s/%s", to, e) < 0) {
			r = -ENOMEM;
			goto next;
		}
		if (lstat(src, &st) < 0) {
			r = -errno;
		} else if (S_ISDIR(st.st_mode)) {
			r = copy_tree(src, dst, name);
		} else if (S_ISREG(st.st_mode)) {
			r = read_full_file(src, TEMPLATE_FILE_MAX, &text, &size);
			if (r >= 0 && wants_substitution(e)) {
				out = substitute(text, name);
				r = out ? 0 : -ENOMEM;
				size = out ? strlen(out) : 0;
			}
			if (r >= 0)
				r = write_file_atomic(dst, out ? out : text, size,
						      st.st_mode & 0755);
		}
	next:
		free(ents[i]);
	}
	free(ents);
	return r;
}

int cmd_init(int argc, char **argv)
{
	static const struct option options[] = {
		{"template", required_argument, NULL, 't'}, {"help", no_argument, NULL, 'h'}, {}};
	_cleanup_free_ char *tdir = NULL, *manifest_path = NULL;
	ManifestError merr = {};
	const char *template = "hello-world", *name;
	Manifest *m = NULL;
	bool known = false;
	int c, r;

	optind = 0;
	while ((c = cli_getopt(argc, argv, "", options)) != -1) {
		if (c == 't')
			template = optarg;
		else if (c == CLI_OPT_HELP) {
			cli_print_help();
			return 0;
		} else
			return CLI_EXIT_USAGE;
	}
	if (optind >= argc)
		return cli_usage_error("which app? Give its name");
	if (argc - optind > 1)
		return cli_usage_error("one app at a time, not '%s' too", argv[optind + 1]);
	name = argv[optind];
	if (!name_valid(name))
		return log_error(
			       "app name \"%s\" must be 1-32 of lowercase letters, digits and dashes",
			       name),
		       2;
	for (size_t i = 0; i < ELEMENTSOF(templates); i++)
		known |= streq(template, templates[i]);
	if (!known)
		return log_error("unknown template \"%s\": use hello-world (Node) or python",
				 template),
		       2;
	if (access(name, F_OK) == 0)
		return log_error("%s already exists; choose another name or remove it", name), 1;
	r = berth_source_path("templates", &tdir);
	if (r < 0)
		return log_error(
			       "cannot find Berth's templates: set BERTH_SOURCE_DIR to a Berth checkout"),
		       1;
	{
		_cleanup_free_ char *t = NULL;

		if (asprintf(&t, "%s/%s", tdir, template) < 0)
			return 1;
		r = copy_tree(t, name, name);
	}
	if (r < 0) {
		(void)rm_rf(name);
		return log_error_errno(r, "cannot create %s from the %s template: %m", name,
				       template),
		       1;
	}
	if (asprintf(&manifest_path, "%s/berth.yml", name) < 0)
		return 1;
	r = manifest_load_at(AT_FDCWD, manifest_path, &m, &merr);
	if (r < 0) {
		fprintf(stderr, "%s\n", merr.text ? merr.text : "invalid berth.yml");
		manifest_error_done(&merr);
		return 1;
	}
	manifest_free(m);
	printf("Created %s from the %s template.\nberth.yml is valid. Next: cd %s && berth dev\n",
	       name, template, name);
	return 0;
}
