/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <linux/seccomp.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "macros.h"
#include "seccomp-filter.h"

scmp_filter_ctx seccomp_filter_new(uint32_t default_action)
{
	scmp_filter_ctx ctx = seccomp_init(default_action);

	/* A 32-bit (int 0x80) or x32 system call would slip past rules written for the native
	 * table; libseccomp treats x32 numbers on the native arch as another arch too. */
	if (ctx && seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) < 0) {
		seccomp_release(ctx);
		return NULL;
	}
	return ctx;
}

void seccomp_filter_freep(scmp_filter_ctx *ctx)
{
	if (*ctx)
		seccomp_release(*ctx);
}

static uint32_t verdict_action(SeccompVerdict v)
{
	switch (v) {
	case SECCOMP_VERDICT_ALLOW:
		return SCMP_ACT_ALLOW;
	case SECCOMP_VERDICT_REFUSE:
		return SCMP_ACT_ERRNO(EPERM);
	case SECCOMP_VERDICT_NOSYS:
		return SCMP_ACT_ERRNO(ENOSYS);
	case SECCOMP_VERDICT_ARGS:
	case _SECCOMP_VERDICT_MAX:
	case _SECCOMP_VERDICT_INVALID:
		break;
	}
	return SCMP_ACT_KILL_PROCESS; /* never used: a caller's mistake is not an allow */
}

int seccomp_filter_add_table(scmp_filter_ctx ctx, const SeccompSyscall *table, size_t n)
{
	uint32_t def;
	int r = seccomp_attr_get(ctx, SCMP_FLTATR_ACT_DEFAULT, &def);

	for (size_t i = 0; i < n && r >= 0; i++) {
		const SeccompSyscall *s = &table[i];
		int nr = seccomp_syscall_resolve_name(s->name);
		uint32_t action;

		if (s->verdict < 0 || s->verdict >= _SECCOMP_VERDICT_MAX)
			return -EINVAL;
		if (s->verdict == SECCOMP_VERDICT_ARGS)
			continue;
		action = verdict_action(s->verdict);
		if (nr == __NR_SCMP_ERROR) {
			/* Left to the default: the safe side only where the default refuses. */
			if (def == SCMP_ACT_ALLOW && action != SCMP_ACT_ALLOW)
				return -ENOSYS;
			continue;
		}
		if (action != def)
			r = seccomp_rule_add(ctx, action, nr, 0);
	}
	return r;
}

int seccomp_filter_add_range(scmp_filter_ctx ctx, uint32_t action, int nr, unsigned arg,
			     uint32_t lo, uint32_t hi, unsigned n_more,
			     const struct scmp_arg_cmp *more)
{
	uint64_t v = lo, end = (uint64_t)hi + 1;
	int r = 0;

	if (n_more > 3 || lo > hi)
		return -EINVAL;
	while (v < end && r >= 0) {
		uint64_t size = v == 0 ? (1ULL << 32) : (v & -v);
		struct scmp_arg_cmp cmp[4];

		while (v + size > end)
			size >>= 1;
		cmp[0] = seccomp_arg_masked_eq(arg, (uint32_t) ~(size - 1), (uint32_t)v);
		for (unsigned i = 0; i < n_more; i++)
			cmp[i + 1] = more[i];
		r = seccomp_rule_add_array(ctx, action, nr, 1 + n_more, cmp);
		v += size;
	}
	return r;
}

int seccomp_filter_add_unless(scmp_filter_ctx ctx, uint32_t action, int nr, unsigned arg,
			      uint32_t value, unsigned n_more, const struct scmp_arg_cmp *more)
{
	int r = 0;

	if (value > 0)
		r = seccomp_filter_add_range(ctx, action, nr, arg, 0, value - 1, n_more, more);
	if (r >= 0 && value < UINT32_MAX)
		r = seccomp_filter_add_range(ctx, action, nr, arg, value + 1, UINT32_MAX, n_more,
					     more);
	return r;
}

int seccomp_filter_refuse_clone_namespaces(scmp_filter_ctx ctx)
{
	int r = 0;

	/* Legacy clone() reads only the low 32 bits of its flags. One rule a flag: a rule
	 * cannot ask whether any of several bits is set. */
	for (unsigned bit = 0; bit < 32 && r >= 0; bit++) {
		uint32_t flag = 1U << bit;

		if (SECCOMP_CLONE_NAMESPACES & flag)
			r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
					     seccomp_arg_masked_eq(0, flag, flag));
	}
	return r;
}

/* libseccomp writes BPF to an fd; a memfd brings it back into memory, so that loading it
 * later allocates nothing. */
int seccomp_filter_export(scmp_filter_ctx ctx, SeccompProgram *ret)
{
	_cleanup_close_ int fd = memfd_create("berth-seccomp", MFD_CLOEXEC);
	_cleanup_free_ struct sock_filter *insns = NULL;
	off_t size;
	int r;

	if (fd < 0)
		return -errno;
	r = seccomp_export_bpf(ctx, fd);
	if (r < 0)
		return r;
	size = lseek(fd, 0, SEEK_END);
	if (size <= 0 || size % (off_t)sizeof(struct sock_filter) != 0 ||
	    size / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS)
		return -EINVAL;
	insns = malloc((size_t)size);
	if (!insns)
		return -ENOMEM;
	if (pread(fd, insns, (size_t)size, 0) != size)
		return -EIO;
	ret->len = (unsigned short)(size / (off_t)sizeof(struct sock_filter));
	ret->insns = TAKE_PTR(insns);
	return 0;
}

void seccomp_program_done(SeccompProgram *p)
{
	free(p->insns);
	*p = (SeccompProgram){};
}

int seccomp_program_load(const SeccompProgram *p, unsigned flags)
{
	struct sock_fprog prog = {.len = p->len, .filter = p->insns};
	long r;

	if (!p->insns)
		return -EINVAL;
	r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
	if (r < 0)
		return -errno;
	/* With TSYNC a positive return is the thread that could not be synchronised. */
	return r > 0 ? -EBUSY : 0;
}
