/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>

#include "secrets.h"
#include "tests.h"

static int parse(const char *text, size_t len, json_t **ret, char *err)
{
	return secrets_parse(text, len, ret, err, 256);
}

TEST(valid_disk_with_padding)
{
	char buf[512] =
		"BERTHSEC1\n{\"shared\":{\"A\":\"1\"},\"apps\":{\"gh\":{\"T\":\"s3cr3t\"}}}";
	char err[256] = "";
	json_t *doc = NULL, *names;
	char *text;

	ASSERT_OK(parse(buf, sizeof(buf), &doc, err));
	ASSERT_STREQ(json_string_value(json_object_get(
			     json_object_get(json_object_get(doc, "apps"), "gh"), "T")),
		     "s3cr3t");
	names = secrets_names(doc);
	text = json_dumps(names, JSON_SORT_KEYS | JSON_COMPACT);
	ASSERT_STREQ(text, "{\"apps\":{\"gh\":[\"T\"]},\"shared\":[\"A\"]}");
	ASSERT_TRUE(strstr(text, "s3cr3t") == NULL);
}

TEST(refusals_never_quote_values)
{
	static const char *const bad[] = {
		"BERTHSEC3\n{}",
		"BERTHSEC1\n{\"other\":{}}",
		/* Version 1 has no daemon scope; version 2's is checked like an app's. */
		"BERTHSEC1\n{\"daemons\":{\"github-api-broker\":{\"T\":\"s3cr3t\"}}}",
		"BERTHSEC2\n{\"daemons\":{\"Bad Daemon\":{\"T\":\"s3cr3t\"}}}",
		"BERTHSEC2\n{\"daemons\":{\"github-api-broker\":{\"T\":5}}}",
		"BERTHSEC2\n{\"daemons\":[]}",
		"BERTHSEC1\n{\"shared\":{\"1BAD\":\"s3cr3t\"}}",
		"BERTHSEC1\n{\"shared\":{\"A\":5}}",
		"BERTHSEC1\n{\"shared\":{\"A\":\"s3cr3t\\u0000x\"}}",
		"BERTHSEC1\n{\"apps\":{\"Bad App\":{}}}",
		"BERTHSEC1\n{\"shared\":{\"A\":\"s3cr3t\",\"A\":\"s3cr3t\"}}",
		"BERTHSEC1\n{\"shared\":{\"A\":\"s3cr3t\"",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char err[256] = "";
		json_t *doc = NULL;

		ASSERT_ERROR(parse(bad[i], strlen(bad[i]), &doc, err), EBADMSG);
		ASSERT_TRUE(err[0] != '\0');
		ASSERT_TRUE(strstr(err, "s3cr3t") == NULL);
	}
}

TEST(version_2_carries_a_daemon_scope)
{
	char buf[512] = "BERTHSEC2\n{\"shared\":{\"A\":\"1\"},\"apps\":{\"gh\":{\"GITHUB_TOKEN\":"
			"\"placeholder\"}},\"daemons\":{\"github-api-broker\":{\"GITHUB_TOKEN\":"
			"\"s3cr3t\"}}}";
	char err[256] = "";
	json_t *doc = NULL;
	char *text;

	ASSERT_OK(parse(buf, sizeof(buf), &doc, err));
	ASSERT_STREQ(json_string_value(json_object_get(
			     secrets_for_daemon(doc, "github-api-broker"), "GITHUB_TOKEN")),
		     "s3cr3t");
	ASSERT_TRUE(secrets_for_daemon(doc, "egress-broker") == NULL);
	text = json_dumps(secrets_names(doc), JSON_SORT_KEYS | JSON_COMPACT);
	ASSERT_STREQ(text, "{\"apps\":{\"gh\":[\"GITHUB_TOKEN\"]},\"daemons\":{\"github-api-broker\":"
			   "[\"GITHUB_TOKEN\"]},\"shared\":[\"A\"]}");
	ASSERT_TRUE(strstr(text, "s3cr3t") == NULL);
}

TEST(data_after_padding_is_refused)
{
	char buf[64] = "BERTHSEC1\n{}";
	char err[256];
	json_t *doc = NULL;

	buf[40] = 'x';
	ASSERT_ERROR(parse(buf, sizeof(buf), &doc, err), EBADMSG);
}

int main(void)
{
	return tests_run();
}
