/* SPDX-License-Identifier: Apache-2.0 */
#include "commands.h"
#include "log.h"

int cmd_doctor(int argc, char **argv)
{
	return log_error("'berth doctor' is not built yet"), 1;
}
