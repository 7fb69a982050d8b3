/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * A seccomp program run the way the kernel runs it, for tests of what a filter answers
 * without loading it (test-agent-filters, test-seccomp-filter).
 */

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "seccomp-filter.h"
#include "tests.h"

#define RET_ALLOW SECCOMP_RET_ALLOW
#define RET_KILL SECCOMP_RET_KILL_PROCESS
#define RET_EPERM (SECCOMP_RET_ERRNO | EPERM)
#define RET_ENOSYS (SECCOMP_RET_ERRNO | ENOSYS)
/* x32's system calls: the native arch token, numbers with bit 30 set. */
#define X32_BIT 0x40000000
/* Bits of a 64-bit argument an int parameter never sees. */
#define HIGH_BITS (1ULL << 32)

/* Classic BPF as seccomp runs it: A, X, scratch memory, forward jumps, a 32-bit result. */
static inline uint32_t bpf_run(const SeccompProgram *p, const struct seccomp_data *d)
{
	uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {};

	for (size_t pc = 0; pc < p->len; pc++) {
		const struct sock_filter *f = &p->insns[pc];
		uint32_t k = f->k, src = BPF_SRC(f->code) == BPF_X ? x : k;
		bool taken = false;

		switch (BPF_CLASS(f->code)) {
		case BPF_LD:
		case BPF_LDX: {
			uint32_t v;

			if (BPF_MODE(f->code) == BPF_ABS) {
				if (BPF_SIZE(f->code) != BPF_W || k % 4 || k + 4 > sizeof(*d))
					TEST_FAIL("pc %zu: a load the kernel would refuse", pc);
				memcpy(&v, (const char *)d + k, 4);
			} else if (BPF_MODE(f->code) == BPF_IMM)
				v = k;
			else if (BPF_MODE(f->code) == BPF_MEM && k < BPF_MEMWORDS)
				v = mem[k];
			else if (BPF_MODE(f->code) == BPF_LEN)
				v = sizeof(*d);
			else
				TEST_FAIL("pc %zu: load mode %#x", pc, BPF_MODE(f->code));
			if (BPF_CLASS(f->code) == BPF_LD)
				a = v;
			else
				x = v;
			break;
		}
		case BPF_ST:
		case BPF_STX:
			if (k >= BPF_MEMWORDS)
				TEST_FAIL("pc %zu: store to %u", pc, k);
			mem[k] = BPF_CLASS(f->code) == BPF_ST ? a : x;
			break;
		case BPF_ALU:
			switch (BPF_OP(f->code)) {
			case BPF_ADD:
				a += src;
				break;
			case BPF_SUB:
				a -= src;
				break;
			case BPF_MUL:
				a *= src;
				break;
			case BPF_DIV:
				a = src ? a / src : 0;
				break;
			case BPF_MOD:
				a = src ? a % src : 0;
				break;
			case BPF_OR:
				a |= src;
				break;
			case BPF_AND:
				a &= src;
				break;
			case BPF_XOR:
				a ^= src;
				break;
			case BPF_LSH:
				a = src < 32 ? a << src : 0;
				break;
			case BPF_RSH:
				a = src < 32 ? a >> src : 0;
				break;
			case BPF_NEG:
				a = -a;
				break;
			default:
				TEST_FAIL("pc %zu: alu op %#x", pc, BPF_OP(f->code));
			}
			break;
		case BPF_JMP:
			switch (BPF_OP(f->code)) {
			case BPF_JA:
				pc += k;
				continue;
			case BPF_JEQ:
				taken = a == src;
				break;
			case BPF_JGT:
				taken = a > src;
				break;
			case BPF_JGE:
				taken = a >= src;
				break;
			case BPF_JSET:
				taken = (a & src) != 0;
				break;
			default:
				TEST_FAIL("pc %zu: jump op %#x", pc, BPF_OP(f->code));
			}
			pc += taken ? f->jt : f->jf;
			break;
		case BPF_RET:
			return BPF_RVAL(f->code) == BPF_A ? a : k;
		case BPF_MISC:
			if (BPF_MISCOP(f->code) == BPF_TAX)
				x = a;
			else
				a = x;
			break;
		default:
			TEST_FAIL("pc %zu: class %#x", pc, BPF_CLASS(f->code));
		}
	}
	TEST_FAIL("the program ran off its end");
}

static inline const char *ret_name(uint32_t r)
{
	static char buf[32];

	if (r == RET_ALLOW)
		return "ALLOW";
	if (r == RET_KILL)
		return "KILL_PROCESS";
	if ((r & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_ERRNO)
		return strerrorname_np((int)(r & SECCOMP_RET_DATA)) ?: "ERRNO(?)";
	snprintf(buf, sizeof(buf), "%#x", r);
	return buf;
}

#define ASSERT_RET(got, want, what)                                                         \
	do {                                                                                \
		uint32_t _g = (got), _w = (want);                                           \
		if (_g != _w)                                                               \
			TEST_FAIL("%s: %s, wanted %s", (what), ret_name(_g), ret_name(_w)); \
	} while (0)
