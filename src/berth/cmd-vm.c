/* SPDX-License-Identifier: Apache-2.0 */
#include "commands.h"
#include "log.h"

int cmd_vm_status(int argc, char **argv)
{
	return log_error("'berth vm status' is not built yet"), 1;
}

int cmd_vm_logs(int argc, char **argv)
{
	return log_error("'berth vm logs' is not built yet"), 1;
}

int cmd_vm_stop(int argc, char **argv)
{
	return log_error("'berth vm stop' is not built yet"), 1;
}
