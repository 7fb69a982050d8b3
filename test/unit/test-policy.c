/* SPDX-License-Identifier: Apache-2.0 */
/* The capability-policy compiler (SPEC 4.3) and agent-init's checks of what it reads. */
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "policy.h"
#include "tests.h"

static char warnings[8192];

static void collect(const char *line, void *userdata)
{
	size_t n = strlen(warnings);

	snprintf(warnings + n, sizeof(warnings) - n, "%s\n", line);
}

static void reset_env(void)
{
	unsetenv("BERTH_MESH_COORDINATOR_PORT");
	unsetenv("BERTH_HTTP_RPC_PORT");
	unsetenv("BERTH_HTTP_RPC_APP");
	warnings[0] = '\0';
	policy_set_warning_sink(collect, NULL);
}

/* Compile @caps_json for @app in /app, @resources_json may be NULL. */
static json_t *compile(const char *app, const char *caps_json, const char *resources_json,
		       char **ret_summary)
{
	json_t *caps = json_loads(caps_json, JSON_ALLOW_NUL, NULL), *res = NULL, *policy = NULL;
	char *summary = NULL;

	ASSERT_NOT_NULL(caps);
	if (resources_json) {
		res = json_loads(resources_json, 0, NULL);
		ASSERT_NOT_NULL(res);
	}
	ASSERT_OK(policy_compile(app, caps, res, "/app", &policy, &summary));
	json_decref(caps);
	json_decref(res);
	if (ret_summary)
		*ret_summary = summary;
	else
		free(summary);
	return policy;
}

static char *dump(const json_t *j)
{
	return json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
}

#define ASSERT_KEY(policy, key, json)                              \
	do {                                                       \
		char *_d = dump(json_object_get((policy), (key))); \
		ASSERT_STREQ(_d, (json));                          \
		free(_d);                                          \
	} while (0)

TEST(baseline_and_key_order)
{
	char *summary, *text;
	json_t *p;

	reset_env();
	p = compile("notes", "[\"filesystem:write:/workspace\"]", NULL, &summary);
	text = json_dumps(p, JSON_COMPACT);
	ASSERT_STREQ(
		text,
		"{\"appName\":\"notes\",\"declaredCapabilities\":[\"filesystem:write:/workspace\"],"
		"\"writePaths\":[\"/dev/null\",\"/tmp/notes\",\"/run/berth/notes\",\"/workspace\"],"
		"\"readPaths\":[],\"networkPorts\":[],\"networkUnrestricted\":false,"
		"\"meshPeers\":[],\"bindPorts\":[],"
		"\"cgroupLimits\":{\"cpu.weight\":\"100\",\"pids.max\":\"1024\"}}");
	ASSERT_STREQ(summary, "writePaths=/dev/null, /tmp/notes, /run/berth/notes, /workspace; "
			      "networkPorts=(none — network denied by default)");
	ASSERT_STREQ(warnings, "");
	free(text);
	free(summary);
	json_decref(p);
}

TEST(trailing_glob_stripped_and_duplicates_once)
{
	json_t *p;

	reset_env();
	p = compile("a",
		    "[\"filesystem:write:/workspace/*\", \"filesystem:write:/workspace\","
		    " \"filesystem:write:/workspace/*\", \"filesystem:write:/tmp/a\"]",
		    NULL, NULL);
	ASSERT_KEY(p, "writePaths", "[\"/dev/null\",\"/tmp/a\",\"/run/berth/a\",\"/workspace\"]");
	ASSERT_KEY(p, "declaredCapabilities",
		   "[\"filesystem:write:/workspace/*\",\"filesystem:write:/workspace\","
		   "\"filesystem:write:/tmp/a\"]");
	json_decref(p);
}

TEST(read_scoping_only_with_a_read_declaration)
{
	char *summary;
	json_t *p;

	reset_env();
	p = compile("a", "[\"github:read:repos\", \"filesystem:write:/workspace\"]", NULL, NULL);
	ASSERT_KEY(p, "readPaths", "[]");
	json_decref(p);

	p = compile("a", "[\"filesystem:read:/context/*\", \"filesystem:read:/workspace/docs\"]",
		    NULL, &summary);
	ASSERT_KEY(p, "readPaths",
		   "[\"/usr\",\"/bin\",\"/sbin\",\"/lib\",\"/etc\",\"/proc\",\"/dev\",\"/tmp\","
		   "\"/run/berth/a\",\"/app\",\"/context\",\"/workspace/docs\"]");
	ASSERT_STREQ(summary, "writePaths=/dev/null, /tmp/a, /run/berth/a; readPaths=/usr, /bin, "
			      "/sbin, /lib, /etc, /proc, /dev, /tmp, /run/berth/a, /app, /context, "
			      "/workspace/docs; networkPorts=(none — network denied by default)");
	free(summary);
	json_decref(p);

	/* github:* adds the broker's directory after the working directory. */
	p = compile("a", "[\"filesystem:read:/tmp\", \"github:read:repos\"]", NULL, NULL);
	ASSERT_KEY(p, "readPaths",
		   "[\"/usr\",\"/bin\",\"/sbin\",\"/lib\",\"/etc\",\"/proc\",\"/dev\",\"/tmp\","
		   "\"/run/berth/a\",\"/app\",\"/run/berth/github-api-broker\"]");
	json_decref(p);
}

TEST(network_ports)
{
	char *summary;
	json_t *p;

	reset_env();
	p = compile("a",
		    "[\"network:connect:8090\", \"network:connect:443\", \"network:connect:8090\","
		    " \"network:connect:0\", \"network:connect:65536\", \"network:connect:http\","
		    " \"network:connect:127.0.0.1:8080\", \"network:connect:65535\"]",
		    NULL, &summary);
	ASSERT_KEY(p, "networkPorts", "[8090,443,65535]");
	ASSERT_KEY(p, "networkUnrestricted", "false");
	ASSERT_STREQ(summary, "writePaths=/dev/null, /tmp/a, /run/berth/a; "
			      "networkPorts=8090, 443, 65535");
	ASSERT_STREQ(
		warnings,
		"[berth:capability-policy] WARNING: ignoring invalid network:connect scope \"0\" (expected a port 1-65535, or \"*\")\n"
		"[berth:capability-policy] WARNING: ignoring invalid network:connect scope \"65536\" (expected a port 1-65535, or \"*\")\n"
		"[berth:capability-policy] WARNING: ignoring invalid network:connect scope \"http\" (expected a port 1-65535, or \"*\")\n"
		"[berth:capability-policy] WARNING: ignoring invalid network:connect scope \"127.0.0.1:8080\" (expected a port 1-65535, or \"*\")\n");
	/* An invalid scope is still a declared capability; it just widens nothing. */
	ASSERT_EQ(json_array_size(json_object_get(p, "declaredCapabilities")), 7);
	free(summary);
	json_decref(p);
}

TEST(network_unrestricted)
{
	char *summary;
	json_t *p;

	reset_env();
	p = compile("browser", "[\"network:connect:*\", \"network:connect:443\"]", NULL, &summary);
	ASSERT_KEY(p, "networkUnrestricted", "true");
	ASSERT_KEY(p, "networkPorts", "[443]");
	ASSERT_STREQ(summary, "writePaths=/dev/null, /tmp/browser, /run/berth/browser; "
			      "networkPorts=* (unrestricted)");
	free(summary);
	json_decref(p);
}

TEST(terminal_and_bind_ports)
{
	char *summary;
	json_t *p;

	reset_env();
	p = compile("terminal", "[\"filesystem:write:/workspace\", \"terminal:attach:*\"]", NULL,
		    &summary);
	ASSERT_KEY(p, "writePaths",
		   "[\"/dev/null\",\"/tmp/terminal\",\"/run/berth/terminal\",\"/workspace\","
		   "\"/dev/pts\",\"/dev/ptmx\"]");
	ASSERT_KEY(p, "bindPorts", "[7681]");
	ASSERT_STREQ(summary, "writePaths=/dev/null, /tmp/terminal, /run/berth/terminal, "
			      "/workspace, /dev/pts, /dev/ptmx; networkPorts=(none — network "
			      "denied by default); bindPorts=7681");
	free(summary);
	json_decref(p);

	setenv("BERTH_HTTP_RPC_PORT", "8787", 1);
	p = compile("a", "[]", NULL, NULL);
	ASSERT_KEY(p, "bindPorts", "[8787]");
	json_decref(p);
	setenv("BERTH_HTTP_RPC_APP", "a", 1);
	p = compile("a", "[\"terminal:attach:*\"]", NULL, NULL);
	ASSERT_KEY(p, "bindPorts", "[8787,7681]");
	json_decref(p);
	setenv("BERTH_HTTP_RPC_APP", "other", 1);
	p = compile("a", "[]", NULL, NULL);
	ASSERT_KEY(p, "bindPorts", "[]");
	json_decref(p);
}

TEST(mesh_peers)
{
	char *summary;
	json_t *p;

	reset_env();
	p = compile("a", "[\"network:peer:laptop-*\", \"network:connect:8090\"]", NULL, &summary);
	ASSERT_KEY(p, "meshPeers", "[\"laptop-*\"]");
	ASSERT_KEY(p, "networkPorts", "[4875,8090]");
	ASSERT_STREQ(summary, "writePaths=/dev/null, /tmp/a, /run/berth/a; networkPorts=4875, "
			      "8090; meshPeers=laptop-*");
	free(summary);
	json_decref(p);
	setenv("BERTH_MESH_COORDINATOR_PORT", "5000", 1);
	p = compile("a", "[\"network:peer:x\"]", NULL, NULL);
	ASSERT_KEY(p, "networkPorts", "[5000]");
	json_decref(p);
}

TEST(malformed_capabilities_skipped_with_a_warning)
{
	json_t *p;

	reset_env();
	p = compile("a",
		    "[\"Filesystem:write:/workspace\", \"filesystem:write\", 42, \"a:b:c\\nd\","
		    " \"a::c\", \"x:y:z\"]",
		    NULL, NULL);
	ASSERT_KEY(p, "declaredCapabilities", "[\"x:y:z\"]");
	ASSERT_KEY(p, "writePaths", "[\"/dev/null\",\"/tmp/a\",\"/run/berth/a\"]");
	ASSERT_STREQ(
		warnings,
		"[berth:capability-policy] WARNING: ignoring malformed capability string \"Filesystem:write:/workspace\" (capability must be 'namespace:action:scope')\n"
		"[berth:capability-policy] WARNING: ignoring malformed capability string \"filesystem:write\" (capability must be 'namespace:action:scope')\n"
		"[berth:capability-policy] WARNING: ignoring malformed capability string 42 (capability must be a string)\n"
		"[berth:capability-policy] WARNING: ignoring malformed capability string \"a:b:c\\nd\" (capability must be 'namespace:action:scope')\n"
		"[berth:capability-policy] WARNING: ignoring malformed capability string \"a::c\" (capability must be 'namespace:action:scope')\n");
	json_decref(p);
}

TEST(filesystem_scopes_revalidated)
{
	json_t *p;

	reset_env();
	p = compile("a",
		    "[\"filesystem:write:/etc\", \"filesystem:write:/workspace/../etc\","
		    " \"filesystem:read:/\", \"filesystem:write:/workspace/*/src\","
		    " \"filesystem:write:workspace\", \"filesystem:write:/work\\u0000space\","
		    " \"filesystem:write:/workspace/\", \"filesystem:delete:/etc\"]",
		    NULL, NULL);
	ASSERT_KEY(p, "writePaths", "[\"/dev/null\",\"/tmp/a\",\"/run/berth/a\"]");
	ASSERT_KEY(p, "readPaths", "[]");
	/* Only filesystem:read and filesystem:write scopes are checked. */
	ASSERT_KEY(p, "declaredCapabilities", "[\"filesystem:delete:/etc\"]");
	ASSERT_STREQ(
		warnings,
		"[berth:capability-policy] WARNING: ignoring capability \"filesystem:write:/etc\" — filesystem path must be /workspace, /context, /tmp, /app or a path beneath one of them, got \"/etc\"\n"
		"[berth:capability-policy] WARNING: ignoring capability \"filesystem:write:/workspace/../etc\" — filesystem path must be canonical — no empty, \".\" or \"..\" segments, and no trailing slash — got \"/workspace/../etc\"\n"
		"[berth:capability-policy] WARNING: ignoring capability \"filesystem:read:/\" — filesystem:*:/ would grant the entire container filesystem — declare a path under /workspace, /context, /tmp, /app instead\n"
		"[berth:capability-policy] WARNING: ignoring capability \"filesystem:write:/workspace/*/src\" — filesystem path may only use a trailing \"/*\" glob (a \"*\" anywhere else becomes a literal directory name), got \"/workspace/*/src\"\n"
		"[berth:capability-policy] WARNING: ignoring capability \"filesystem:write:workspace\" — filesystem path must be absolute (start with \"/\"), got \"workspace\"\n"
		"[berth:capability-policy] WARNING: ignoring capability \"filesystem:write:/work\\u0000space\" — filesystem path must not contain a null byte\n"
		"[berth:capability-policy] WARNING: ignoring capability \"filesystem:write:/workspace/\" — filesystem path must be canonical — no empty, \".\" or \"..\" segments, and no trailing slash — got \"/workspace/\"\n");
	json_decref(p);
}

static bool scope_ok(const char *s)
{
	char *issue = NULL;

	ASSERT_OK(policy_fs_scope_issue(s, strlen(s), &issue));
	free(issue);
	return issue == NULL;
}

TEST(fs_scope_examples_of_spec_1_4)
{
	static const char *const accepted[] = {
		"/workspace", "/workspace/*", "/workspace/packages/x/boundary-app-a",
		"/context",   "/tmp/my-app",  "/app",
	};
	static const char *const rejected[] = {
		"/etc",
		"/etc/passwd",
		"/root",
		"/usr/local/bin",
		"/workspacex",
		"/tmpfoo",
		"*",
		"workspace",
		"/workspace/../etc",
		"/workspace/./x",
		"/workspace//x",
		"/workspace/",
		"/workspace/*/src",
		"/",
		"/*",
		"",
	};

	for (size_t i = 0; i < sizeof(accepted) / sizeof(accepted[0]); i++)
		if (!scope_ok(accepted[i]))
			TEST_FAIL("%s should be accepted", accepted[i]);
	for (size_t i = 0; i < sizeof(rejected) / sizeof(rejected[0]); i++)
		if (scope_ok(rejected[i]))
			TEST_FAIL("%s should be rejected", rejected[i]);
}

TEST(capability_regex)
{
	ASSERT_TRUE(policy_capability_is_well_formed("a:b:c", 5));
	ASSERT_TRUE(policy_capability_is_well_formed("network:connect:127.0.0.1:8080", 30));
	ASSERT_TRUE(policy_capability_is_well_formed("my_ns-1:act_2:*", 15));
	ASSERT_FALSE(policy_capability_is_well_formed("a:b:", 4));
	ASSERT_FALSE(policy_capability_is_well_formed(":b:c", 4));
	ASSERT_FALSE(policy_capability_is_well_formed("a:B:c", 5));
	ASSERT_FALSE(policy_capability_is_well_formed("a:b:c\r", 6));
	ASSERT_FALSE(policy_capability_is_well_formed("a:b:\xe2\x80\xa8", 7));
	ASSERT_FALSE(policy_capability_is_well_formed("a.b:c:d", 7));
}

TEST(cgroup_limits)
{
	json_t *p;

	reset_env();
	p = compile("a", "[]", "{\"cpu\": 0.5, \"memory_mb\": 512, \"pids\": 64, \"gpu\": 1}",
		    NULL);
	ASSERT_KEY(
		p, "cgroupLimits",
		"{\"cpu.weight\":\"100\",\"cpu.max\":\"50000 100000\",\"memory.max\":\"536870912\","
		"\"memory.swap.max\":\"0\",\"pids.max\":\"64\"}");
	json_decref(p);
	p = compile("a", "[]", "{\"cpu\": 0.001}", NULL);
	ASSERT_KEY(p, "cgroupLimits",
		   "{\"cpu.weight\":\"100\",\"cpu.max\":\"1000 100000\",\"pids.max\":\"1024\"}");
	json_decref(p);
	p = compile("a", "[]", "{\"cpu\": 2, \"memory_mb\": -1}", NULL);
	ASSERT_KEY(p, "cgroupLimits",
		   "{\"cpu.weight\":\"100\",\"cpu.max\":\"200000 100000\",\"pids.max\":\"1024\"}");
	ASSERT_TRUE(strstr(warnings, "resources.memory_mb") != NULL);
	ASSERT_TRUE(strstr(warnings, "memory.high") == NULL);
	json_decref(p);
	p = compile("a", "[]", "{\"cpu\": 0.000004}", NULL);
	ASSERT_KEY(p, "cgroupLimits",
		   "{\"cpu.weight\":\"100\",\"cpu.max\":\"1000 100000\",\"pids.max\":\"1024\"}");
	json_decref(p);
}

TEST(compile_refuses_bad_arguments)
{
	json_t *caps = json_array(), *p = NULL, *obj = json_object();
	char *s = NULL;

	reset_env();
	ASSERT_ERROR(policy_compile("Bad_Name", caps, NULL, "/app", &p, &s), EINVAL);
	ASSERT_ERROR(policy_compile("../x", caps, NULL, "/app", &p, &s), EINVAL);
	ASSERT_ERROR(policy_compile("", caps, NULL, "/app", &p, &s), EINVAL);
	ASSERT_ERROR(policy_compile("a", obj, NULL, "/app", &p, &s), EINVAL);
	ASSERT_ERROR(policy_compile("a", caps, caps, "/app", &p, &s), EINVAL);
	ASSERT_ERROR(policy_compile("a", caps, NULL, "app", &p, &s), EINVAL);
	ASSERT_ERROR(policy_compile("a", caps, NULL, NULL, &p, &s), EINVAL);
	ASSERT_TRUE(p == NULL && s == NULL);
	json_decref(caps);
	json_decref(obj);
}

TEST(write_path_allowlist)
{
	static const char *const allowed[] = {
		"/dev/null",	      "/dev/pts",   "/dev/ptmx",      "/run/berth/notes",
		"/run/berth/notes/x", "/workspace", "/workspace/a/b", "/tmp/notes",
		"/context",	      "/app",
	};
	static const char *const refused[] = {
		"/dev",
		"/dev/pts/0",
		"/dev/tty",
		"/run/berth",
		"/run/berth/other",
		"/run",
		"/workspacex",
		"/",
		"workspace",
		"/workspace/",
		"/workspace/../etc",
		"/workspace/./x",
		"/workspace//x",
		"/workspace/*",
		"/etc",
		"/run/berth/notesx",
		"",
	};

	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
		if (!policy_write_path_allowed(allowed[i], strlen(allowed[i]), "notes"))
			TEST_FAIL("%s should be allowed", allowed[i]);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (policy_write_path_allowed(refused[i], strlen(refused[i]), "notes"))
			TEST_FAIL("%s should be refused", refused[i]);
	ASSERT_FALSE(policy_write_path_allowed("/workspace\0/x", 13, "notes"));
	/* A name that is not one segment grants no run directory at all. */
	ASSERT_FALSE(policy_write_path_allowed("/run/berth/a/b", 14, "a/b"));
	ASSERT_FALSE(policy_write_path_allowed("/run/berth/..", 13, ".."));
	ASSERT_FALSE(policy_write_path_allowed("/run/berth/", 11, ""));
}

TEST(policy_write_mode_owner_bytes)
{
	char dir[] = "/tmp/test-policy.XXXXXX", path[PATH_MAX], buf[4096];
	json_t *p;
	struct stat st;
	ssize_t n;
	int fd;

	reset_env();
	ASSERT_NOT_NULL(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/notes.json", dir);
	p = compile("notes", "[\"network:connect:8090\"]", NULL, NULL);
	ASSERT_OK(policy_write(path, p, getgid()));
	ASSERT_OK(stat(path, &st));
	ASSERT_EQ(st.st_mode & 07777, 0640);
	ASSERT_EQ(st.st_gid, getgid());
	fd = open(path, O_RDONLY | O_CLOEXEC);
	ASSERT_OK(fd);
	n = read(fd, buf, sizeof(buf) - 1);
	ASSERT_TRUE(n > 0);
	buf[n] = '\0';
	close(fd);
	ASSERT_STREQ(buf,
		     "{\"appName\":\"notes\",\"bindPorts\":[],\"cgroupLimits\":{\"cpu.weight\":"
		     "\"100\",\"pids.max\":\"1024\"},\"declaredCapabilities\":[\"network:"
		     "connect:8090\"],\"meshPeers\":[],\"networkPorts\":[8090],"
		     "\"networkUnrestricted\":false,\"readPaths\":[],\"writePaths\":[\"/dev/"
		     "null\",\"/tmp/notes\",\"/run/berth/notes\"]}");
	unlink(path);
	rmdir(dir);
	json_decref(p);
}

static int parse(const char *text, AgentPolicy *p, char **err)
{
	return agent_policy_parse(text, strlen(text), p, err);
}

TEST(compiled_policy_is_what_agent_init_accepts)
{
	json_t *p;
	char *text, *err = NULL;
	AgentPolicy ap = {};

	reset_env();
	p = compile("notes",
		    "[\"filesystem:write:/workspace\", \"filesystem:read:/context\", "
		    "\"network:connect:8090\", \"terminal:attach:*\", \"network:peer:x\"]",
		    "{\"cpu\": 1}", NULL);
	text = json_dumps(p, JSON_COMPACT | JSON_SORT_KEYS);
	ASSERT_OK(parse(text, &ap, &err));
	ASSERT_STREQ(ap.app_name, "notes");
	ASSERT_EQ(json_array_size(ap.write_paths), 6);
	ASSERT_EQ(json_array_size(ap.bind_ports), 1);
	ASSERT_FALSE(ap.network_unrestricted);
	agent_policy_done(&ap);
	free(text);
	json_decref(p);
}

TEST(agent_policy_defaults_and_refusals)
{
	static const char *const bad[] = {
		"[]",
		"{\"writePaths\":[]}",
		"{\"appName\":\"a\"}",
		"{\"appName\":\"a\",\"writePaths\":[],\"extra\":1}",
		"{\"appName\":\"a\",\"writePaths\":[],\"appName\":\"b\"}",
		"{\"appName\":\"a\",\"writePaths\":[1]}",
		"{\"appName\":\"a\",\"writePaths\":[\"/tmp/\\u0000x\"]}",
		"{\"appName\":\"a\",\"writePaths\":[\"\"]}",
		"{\"appName\":\"a\",\"writePaths\":\"/tmp\"}",
		"{\"appName\":\"a\",\"writePaths\":[],\"networkPorts\":[0]}",
		"{\"appName\":\"a\",\"writePaths\":[],\"networkPorts\":[65536]}",
		"{\"appName\":\"a\",\"writePaths\":[],\"bindPorts\":[\"80\"]}",
		"{\"appName\":\"a\",\"writePaths\":[],\"networkUnrestricted\":1}",
		"{\"appName\":\"a/b\",\"writePaths\":[]}",
		"{\"appName\":\"..\",\"writePaths\":[]}",
		"{\"appName\":\"a\\nb\",\"writePaths\":[]}",
		"{\"appName\":\"a\",\"writePaths\":[],\"cgroupLimits\":[]}",
		"{\"appName\":\"a\",\"writePaths\":[]} trailing",
	};
	AgentPolicy p = {};
	char *err = NULL;

	ASSERT_OK(parse(
		"{\"appName\":\"notes\",\"declaredCapabilities\":[\"filesystem:write:/workspace\"],"
		"\"writePaths\":[\"/dev/null\",\"/tmp/notes\",\"/run/berth/notes\",\"/workspace\"],"
		"\"readPaths\":[], \"networkPorts\":[], \"networkUnrestricted\":false,"
		"\"meshPeers\":[], \"bindPorts\":[],"
		"\"cgroupLimits\":{\"cpu.weight\":\"100\",\"pids.max\":\"1024\"}}",
		&p, &err));
	agent_policy_done(&p);
	ASSERT_OK(parse("{\"appName\":\"a\",\"writePaths\":[\"/tmp/a\"]}", &p, &err));
	ASSERT_EQ(json_array_size(p.read_paths), 0);
	ASSERT_EQ(json_array_size(p.network_ports), 0);
	ASSERT_EQ(json_array_size(p.bind_ports), 0);
	ASSERT_EQ(json_array_size(p.mesh_peers), 0);
	ASSERT_EQ(json_array_size(p.declared), 0);
	ASSERT_FALSE(p.network_unrestricted);
	agent_policy_done(&p);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int r = parse(bad[i], &p, &err);

		if (r != -EINVAL || !err)
			TEST_FAIL("accepted (%d): %s", r, bad[i]);
		free(err);
		err = NULL;
	}
}

TEST(app_identity_from_environment)
{
	static const char *const no_identity[][2] = {
		{NULL, NULL},	 {"10000", NULL},	  {NULL, "10000"},
		{"", "10000"},	 {"root", "10000"},	  {"10000", "wheel"},
		{"0", "0"},	 {"10000", "0"},	  {"0", "10000"},
		{"-1", "10000"}, {"4294967295", "10000"}, {"1e4", "10000"},
	};
	AppIdentity id;

	for (size_t i = 0; i < sizeof(no_identity) / sizeof(no_identity[0]); i++) {
		app_identity_parse(no_identity[i][0], no_identity[i][1], "9999", &id);
		if (id.set)
			TEST_FAIL("uid=%s gid=%s must mean staying root",
				  no_identity[i][0] ?: "(unset)", no_identity[i][1] ?: "(unset)");
	}
	app_identity_parse("10001", "10001", "9999,5", &id);
	ASSERT_TRUE(id.set);
	ASSERT_EQ(id.uid, 10001);
	ASSERT_EQ(id.gid, 10001);
	ASSERT_EQ(id.n_supplementary, 2);
	ASSERT_EQ(id.supplementary[0], 9999);
	ASSERT_EQ(id.supplementary[1], 5);
	ASSERT_EQ(id.n_groups, 3);
	ASSERT_EQ(id.groups[0], 10001);
	app_identity_parse(" 10000 ", "10000", " 9999 ,,0,tty,5,9999,10000", &id);
	ASSERT_TRUE(id.set);
	ASSERT_EQ(id.n_supplementary, 3);
	ASSERT_EQ(id.supplementary[0], 9999);
	ASSERT_EQ(id.supplementary[1], 5);
	ASSERT_EQ(id.supplementary[2], 10000);
	ASSERT_EQ(id.n_groups, 3); /* 10000 is the gid already */
	app_identity_parse("10000", "10000", NULL, &id);
	ASSERT_TRUE(id.set);
	ASSERT_EQ(id.n_supplementary, 0);
	ASSERT_EQ(id.n_groups, 1);
}

TEST(enforcement_required_values)
{
	ASSERT_TRUE(enforcement_required("1"));
	ASSERT_TRUE(enforcement_required("true"));
	ASSERT_FALSE(enforcement_required(NULL));
	ASSERT_FALSE(enforcement_required("0"));
	ASSERT_FALSE(enforcement_required("yes"));
	ASSERT_FALSE(enforcement_required("TRUE"));
	ASSERT_FALSE(enforcement_required(""));
}

int main(void)
{
	return tests_run();
}
