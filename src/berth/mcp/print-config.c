/* SPDX-License-Identifier: Apache-2.0 */
/*
 * berth mcp --print-config CLIENT: what adds this server to an MCP client, exactly, on
 * standard output (docs/mcp.md, "Adding Berth to an MCP client"). Clients start servers
 * from their own working directory and environment, so the command is an absolute path
 * (the berth on $PATH when it is this one) and the app's folder is absolute too.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "exec-util.h"
#include "fileio.h"
#include "log.h"
#include "mcp.h"

typedef enum ConfigStyle {
	STYLE_COMMAND,	   /* a shell command that adds it */
	STYLE_MCP_SERVERS, /* {"mcpServers": {name: {command, args}}} */
	STYLE_VSCODE,	   /* {"servers": {name: {type: "stdio", command, args}}} */
	STYLE_TOML,	   /* [mcp_servers.name] command, args */
	_STYLE_MAX,
} ConfigStyle;

static const struct {
	const char *client;
	ConfigStyle style;
	const char *where; /* what to do with it, for standard error */
} clients[] = {
	{"claude-code", STYLE_COMMAND,
	 "run this command (add --scope user to have it in every project)"},
	{"claude-desktop", STYLE_MCP_SERVERS,
	 "merge this into claude_desktop_config.json (Settings > Developer > Edit Config), then restart Claude Desktop"},
	{"cursor", STYLE_MCP_SERVERS,
	 "merge this into ~/.cursor/mcp.json, or .cursor/mcp.json in a project"},
	{"vscode", STYLE_VSCODE,
	 "merge this into .vscode/mcp.json in the workspace (or the user mcp.json: MCP: Open User Configuration)"},
	{"codex", STYLE_TOML, "append this to ~/.codex/config.toml"},
};

/* The berth to name: the one on $PATH when it is this binary, else this binary. */
static char *berth_command(void)
{
	_cleanup_free_ char *self = realpath("/proc/self/exe", NULL), *found = NULL,
			    *found_real = NULL;

	if (find_executable_in_path("berth", &found) >= 0 && (found_real = realpath(found, NULL)) &&
	    self && streq(found_real, self))
		return TAKE_PTR(found);
	if (self)
		log_warning("this berth (%s) is not the one on $PATH; the config names it, so it "
			    "breaks when that file moves. Install berth with scripts/install.sh "
			    "(README.md, \"Using it on your own app\") and print the config again "
			    "with the installed one.",
			    self);
	return TAKE_PTR(self);
}

/* The arguments of `berth mcp` for the client: the app, its folder, and the options given. */
static json_t *server_args(Mcp *c)
{
	json_t *a =
		json_pack("[s, s, s, s, s]", "mcp", "--app", c->l.name, "--app-dir", c->l.app_dir);
	char n[16];

	if (!a)
		return NULL;
	if (c->only) {
		_cleanup_free_ char *list = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&list, &len);

		for (size_t i = 0; f && c->only[i]; i++)
			fprintf(f, "%s%s", i ? "," : "", c->only[i]);
		if (f && fclose(f) == 0) {
			json_array_append_new(a, json_string("--only"));
			json_array_append_new(a, json_string(list));
		}
	}
	if (c->container) {
		json_array_append_new(a, json_string("--container"));
		json_array_append_new(a, json_string(c->container));
	}
	if (c->no_boot)
		json_array_append_new(a, json_string("--no-boot"));
	if (c->boot_timeout_s != MCP_BOOT_TIMEOUT_S_DEFAULT) {
		snprintf(n, sizeof(n), "%u", c->boot_timeout_s);
		json_array_append_new(a, json_string("--boot-timeout"));
		json_array_append_new(a, json_string(n));
	}
	return a;
}

/* @s as one shell word. */
static void shell_word(FILE *f, const char *s)
{
	if (*s && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
			    "-_./=:,+@%") == strlen(s)) {
		fputs(s, f);
		return;
	}
	fputc('\'', f);
	for (; *s; s++)
		if (*s == '\'')
			fputs("'\\''", f);
		else
			fputc(*s, f);
	fputc('\'', f);
}

static char *json_text(json_t *v, size_t flags)
{
	return json_dumps(v, flags | JSON_ENCODE_ANY);
}

static int print_style(FILE *f, ConfigStyle style, const char *name, const char *command,
		       json_t *args)
{
	_cleanup_free_ char *text = NULL;
	json_auto_t *doc = NULL;
	json_t *arg;
	size_t i;

	switch (style) {
	case STYLE_COMMAND:
		fputs("claude mcp add ", f);
		shell_word(f, name);
		fputs(" -- ", f);
		shell_word(f, command);
		json_array_foreach(args, i, arg) {
			fputc(' ', f);
			shell_word(f, json_string_value(arg));
		}
		fputc('\n', f);
		return 0;
	case STYLE_MCP_SERVERS:
		doc = json_pack("{s:{s:{s:s, s:O}}}", "mcpServers", name, "command", command,
				"args", args);
		break;
	case STYLE_VSCODE:
		doc = json_pack("{s:{s:{s:s, s:s, s:O}}}", "servers", name, "type", "stdio",
				"command", command, "args", args);
		break;
	case STYLE_TOML: {
		_cleanup_free_ char *cmd = NULL, *list = NULL;
		json_auto_t *s = json_string(command);

		/* A JSON string is a TOML basic string, and a JSON array of them a TOML array. */
		cmd = s ? json_text(s, 0) : NULL;
		list = json_text(args, JSON_COMPACT);
		if (!cmd || !list)
			return -ENOMEM;
		fprintf(f, "[mcp_servers.%s]\ncommand = %s\nargs = %s\n", name, cmd, list);
		return 0;
	}
	case _STYLE_MAX:
		break;
	}
	text = doc ? json_text(doc, JSON_INDENT(2)) : NULL;
	if (!text)
		return -ENOMEM;
	fprintf(f, "%s\n", text);
	return 0;
}

int mcp_print_config(Mcp *c)
{
	_cleanup_free_ char *command = NULL, *out = NULL;
	json_auto_t *args = NULL;
	size_t len = 0;
	FILE *f;
	int r;

	for (size_t i = 0; i < ELEMENTSOF(clients); i++) {
		if (!streq(clients[i].client, c->print_config))
			continue;
		/* The manifest is checked as a session would: a config for an app that
		 * cannot be served is no use. */
		r = vm_launch_load_manifest(c->app_dir, &c->l.manifest);
		if (r < 0)
			return log_error("couldn't load berth.yml from \"%s\": see above",
					 c->app_dir);
		c->l.name = strdup(manifest_name(c->l.manifest));
		c->l.app_dir = realpath(c->app_dir, NULL);
		command = berth_command();
		args = c->l.name && c->l.app_dir && command ? server_args(c) : NULL;
		f = args ? open_memstream(&out, &len) : NULL;
		if (!f)
			return log_error_errno(-ENOMEM, "out of memory");
		r = print_style(f, clients[i].style, c->l.name, command, args);
		if (fclose(f) != 0 || r < 0)
			return log_error_errno(-ENOMEM, "out of memory");
		if (loop_write(c->out_fd, out, len) < 0)
			return log_error_errno(-errno, "cannot write the config: %m");
		mcp_say("for %s: %s", clients[i].client, clients[i].where);
		return 0;
	}
	return cli_usage_error(
		"--print-config takes claude-code, claude-desktop, cursor, vscode or "
		"codex, not '%s'",
		c->print_config);
}
