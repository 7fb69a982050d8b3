/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * One function per subcommand, each in its own cmd-<verb>.c. Each gets the
 * arguments after its verb (argv[0] is the verb itself, for getopt) and returns
 * the process exit status.
 */

int cmd_vm_install(int argc, char **argv);
int cmd_vm_status(int argc, char **argv);
int cmd_vm_logs(int argc, char **argv);
int cmd_vm_stop(int argc, char **argv);
int cmd_audit_verify(int argc, char **argv);
int cmd_audit_list(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_rpc(int argc, char **argv);
int cmd_init(int argc, char **argv);
int cmd_dev(int argc, char **argv);
int cmd_mcp(int argc, char **argv);
int cmd_attest(int argc, char **argv);
int cmd_deploy(int argc, char **argv);
int cmd_test(int argc, char **argv);
