/* SPDX-License-Identifier: Apache-2.0 */
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paths.h"

char *berth_home(void)
{
	const char *e = getenv("BERTH_HOME");
	struct passwd *pw;
	char *p;

	if (e && *e == '/')
		return strdup(e);
	e = getenv("HOME");
	if (!e || *e != '/') {
		pw = getpwuid(getuid());
		e = pw ? pw->pw_dir : NULL;
	}
	if (!e)
		return NULL;
	if (asprintf(&p, "%s/.berth", e) < 0)
		return NULL;
	return p;
}

static char *home_join(const char *suffix)
{
	char *home = berth_home(), *p = NULL;

	if (home && asprintf(&p, "%s/%s", home, suffix) < 0)
		p = NULL;
	free(home);
	return p;
}

char *berth_vm_dir(void)
{
	return home_join("vm");
}

char *berth_run_root(void)
{
	return home_join("run/vm");
}

char *berth_config_path(void)
{
	return home_join("config.json");
}

char *berth_run_dir(const char *name)
{
	char *root, *p = NULL;

	if (!vm_name_valid(name))
		return NULL;
	root = berth_run_root();
	if (root && asprintf(&p, "%s/%s", root, name) < 0)
		p = NULL;
	free(root);
	return p;
}

int vm_name_valid(const char *name)
{
	size_t n;

	if (!name)
		return 0;
	n = strlen(name);
	if (n == 0 || n > 64)
		return 0;
	if (!((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= '0' && name[0] <= '9')))
		return 0;
	for (const char *c = name; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '.' ||
		      *c == '_' || *c == '-'))
			return 0;
	return 1;
}
