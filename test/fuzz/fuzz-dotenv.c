/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fuzz --env-file parsing and the secrets disk: any text the dotenv parser accepts must
 * become a disk the guest's parser (src/berth-init/secrets.c) accepts, holding every
 * value byte for byte; any text it refuses must leave the set as it was and say where,
 * without quoting a value. abort() when an invariant breaks.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env-args.h"
#include "utf8.h"
#include "macros.h"
#include "secrets-disk.h"
#include "secrets.h" /* berth-init's */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok)
{
	if (!ok)
		abort();
}

static void round_trip(const EnvSet *s)
{
	char *image = NULL, err[512];
	size_t len;
	json_t *doc = NULL, *shared;
	int r = secrets_disk_build(s, NULL, 0, &image, &len, err, sizeof(err));

	if (r == -E2BIG)
		return;
	check(r == 0 && len % SECRETS_DISK_ALIGN == 0 && len <= SECRETS_DISK_SIZE_MAX);
	check(secrets_parse(image, len, &doc, err, sizeof(err)) == 0);
	shared = json_object_get(doc, "shared");
	check(json_object_size(shared) == env_set_size(s));
	for (size_t i = 0; i < env_set_size(s); i++) {
		json_t *v = json_object_get(shared, env_set_name(s, i));
		size_t vlen;
		const char *value = env_set_value(s, i, &vlen);

		check(env_name_valid(env_set_name(s, i), strlen(env_set_name(s, i))));
		check(utf8_valid(value, vlen) && !memchr(value, '\0', vlen));
		check(json_is_string(v) && json_string_length(v) == vlen &&
		      !memcmp(json_string_value(v), value, vlen));
	}
	json_decref(doc);
	secrets_disk_image_free(image, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_(env_set_freep) EnvSet *s = NULL;
	char err[512] = "";
	int r;

	if (size > ENV_FILE_SIZE_MAX)
		return 0;
	/* One variable first: a refused file must leave it alone. */
	check(env_set_add_env(&s, "KEPT=1", err, sizeof(err)) == 0);
	r = env_set_parse_dotenv(&s, (const char *)data, size, "f.env", err, sizeof(err));
	if (r < 0) {
		check(r == -EBADMSG || r == -E2BIG);
		check(strncmp(err, "f.env:", 6) == 0);
		check(env_set_size(s) == 1 && streq(env_set_get(s, "KEPT", NULL), "1"));
		return 0;
	}
	/* --env wins over the file. */
	check(streq(env_set_get(s, "KEPT", NULL), "1"));
	round_trip(s);
	return 0;
}
