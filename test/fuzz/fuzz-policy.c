/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The policy file as agent-init reads it, and the boot disk as berth-init reads it: bytes
 * that cross from the host (or from a tampered file) into a root process. Whatever the
 * reader accepts, the writer must write back as the same policy, and the writer's bytes
 * must read back to themselves.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "boot-disk.h"
#include "policy.h"

static void check(int ok)
{
	if (!ok)
		abort();
}

static void policy(const uint8_t *data, size_t size)
{
	CapabilityPolicy *p = NULL, *q = NULL;
	char *err = NULL, *a = NULL, *b = NULL;
	size_t alen, blen;
	int r = capability_policy_decode((const char *)data, size, &p, &err);

	check((r == 0) == (p != NULL));
	if (r < 0) {
		check(r == -ENOMEM || err != NULL);
		free(err);
		return;
	}
	check(capability_policy_encode(p, &a, &alen) == 0);
	check(capability_policy_decode(a, alen, &q, &err) == 0);
	check(capability_policy_encode(q, &b, &blen) == 0);
	check(alen == blen && memcmp(a, b, alen) == 0);
	for (size_t i = 0; i < p->write_paths.n; i++)
		check(capability_write_path_allowed(p->write_paths.v[i],
						    strlen(p->write_paths.v[i]), p->app_name));
	(void)capability_policy_grants(p, "/workspace/x", POLICY_ACCESS_WRITE);
	(void)capability_policy_grants(p, "/etc/passwd", POLICY_ACCESS_READ);
	free(a);
	free(b);
	capability_policy_free(p);
	capability_policy_free(q);
}

static void boot_disk(const uint8_t *data, size_t size)
{
	json_t *plan = NULL;
	const char *secrets = NULL;
	size_t secrets_len = 0;
	char err[256];
	int r = boot_disk_parse((const char *)data, size, &plan, &secrets, &secrets_len, err,
				sizeof(err));

	if (r < 0) {
		check(r == -EBADMSG && plan == NULL);
		return;
	}
	check(json_is_object(plan));
	check(!secrets || (secrets >= (const char *)data &&
			   secrets + secrets_len <= (const char *)data + size));
	json_decref(plan);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	policy(data, size);
	boot_disk(data, size);
	return 0;
}
