/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * relay_start() - keep the real standard output for MCP (its fd in *@ret_mcp_fd) and send
 * everything written to fds 1 and 2 to the real standard error, a line at a time, prefixed
 * and neutralised for a terminal (term-text.h). Returns 0 or -errno.
 */
int relay_start(int *ret_mcp_fd);
/* Flush what is left and stop the relay (a detached child may still hold the pipe). */
void relay_stop(void);
