/* SPDX-License-Identifier: Apache-2.0 */
#include "commands.h"
#include "log.h"

int cmd_vm_install(int argc, char **argv)
{
	return log_error("'berth vm install' is not built yet"), 1;
}
