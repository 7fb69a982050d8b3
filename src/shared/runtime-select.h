/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Which sandbox runs an app: --runtime on the command, then BERTH_SANDBOX, then "sandbox"
 * in ~/.berth/config.json, then the host default, the VM (with KVM, or under emulation
 * without it). The other is a Docker container on the host's kernel (docs/runtimes.md).
 */

typedef enum SandboxRuntime {
	SANDBOX_VM,
	SANDBOX_DOCKER,
	_SANDBOX_RUNTIME_MAX,
	_SANDBOX_RUNTIME_INVALID = -22,
} SandboxRuntime;

/*
 * runtime_select() - resolve the runtime from @flag (may be NULL) and the settings.
 * Returns SANDBOX_VM or SANDBOX_DOCKER with a malloc()ed "docker (BERTH_SANDBOX)" in
 * *@reason (which, and who chose it), or a negative errno with an explanation there (what
 * was chosen where, and what to do instead).
 */
int runtime_select(const char *flag, char **reason);
