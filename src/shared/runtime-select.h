/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Which sandbox runs an app: --runtime on the command, then BERTH_SANDBOX, then "sandbox"
 * in ~/.berth/config.json, then the host default. This build has one runtime, the VM
 * (with KVM, or under emulation without it); the Docker runtime is not available, and
 * choosing it is an error that says so.
 */

typedef enum SandboxRuntime {
	SANDBOX_VM,
	SANDBOX_DOCKER,
	_SANDBOX_RUNTIME_MAX,
	_SANDBOX_RUNTIME_INVALID = -22,
} SandboxRuntime;

/*
 * runtime_select() - resolve the runtime from @flag (may be NULL) and the settings.
 * Returns SANDBOX_VM, or a negative errno with a malloc()ed explanation in *@reason (what
 * was chosen where, and what to do instead).
 */
int runtime_select(const char *flag, char **reason);
