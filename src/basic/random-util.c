/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "random-util.h"

/* splitmix64: spreads a few changing bits (clocks, pid, a counter) over every byte. */
static uint64_t mix64(uint64_t x)
{
	x += UINT64_C(0x9e3779b97f4a7c15);
	x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
	return x ^ (x >> 31);
}

static void fallback_bytes(unsigned char *b, size_t n)
{
	static uint64_t counter;
	struct timespec rt, mt;
	uint64_t seed;

	(void)clock_gettime(CLOCK_REALTIME, &rt);
	(void)clock_gettime(CLOCK_MONOTONIC, &mt);
	seed = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
	seed ^= mix64((uint64_t)mt.tv_sec * 1000000000u + (uint64_t)mt.tv_nsec);
	seed ^= (uint64_t)getpid() << 32;
	for (size_t i = 0; i < n; i += 8) {
		/* Atomic: berth-vmm has threads. */
		uint64_t v = mix64(seed ^ __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));

		memcpy(b + i, &v, n - i < 8 ? n - i : 8);
	}
}

void random_bytes(void *buf, size_t n)
{
	unsigned char *b = buf;
	size_t done = 0;

	while (done < n) {
		ssize_t k = getrandom(b + done, n - done, GRND_NONBLOCK);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		done += (size_t)k;
	}
	if (done < n)
		fallback_bytes(b + done, n - done);
}

void random_hex(char *ret, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	unsigned char b[64];

	for (size_t off = 0; off < n; off += sizeof(b)) {
		size_t k = n - off < sizeof(b) ? n - off : sizeof(b);

		random_bytes(b, k);
		for (size_t i = 0; i < k; i++) {
			ret[2 * (off + i)] = digits[b[i] >> 4];
			ret[2 * (off + i) + 1] = digits[b[i] & 0xf];
		}
	}
	ret[2 * n] = '\0';
}

void random_uuid(char ret[RANDOM_UUID_LEN + 1])
{
	unsigned char b[16];

	random_bytes(b, sizeof(b));
	b[6] = (b[6] & 0x0f) | 0x40; /* version 4 */
	b[8] = (b[8] & 0x3f) | 0x80; /* the RFC 4122 variant */
	snprintf(ret, RANDOM_UUID_LEN + 1,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
		 b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
		 b[15]);
}
