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
		"BERTHSEC2\n{}",
		"BERTHSEC1\n{\"other\":{}}",
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
