/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <getopt.h>
#include <stdio.h>

#include "macros.h"

/*
 * The CLI's conventions, kept by one table in main.c (every command's usage line and help)
 * so that all commands answer alike: -h and --help print the help on standard output and
 * exit 0; a usage error is one line on standard error saying what was wrong, then the
 * usage line and a pointer to --help, and exit status 2. Runtime failures exit 1.
 */

#define CLI_EXIT_USAGE 2

/* cli_getopt() returns these besides an option's value and -1 (no more options). */
#define CLI_OPT_HELP (-2) /* -h or --help: print cli_print_help() and return 0 */
#define CLI_OPT_BAD (-3)  /* reported already (cli_usage_error()): return CLI_EXIT_USAGE */

/* Where cli_print_help() writes (standard output unless a command moved it). */
void cli_set_help_fd(int fd);

/* The current command's usage line and help text, to the help fd. */
void cli_print_help(void);

/*
 * cli_usage_error() - "berth VERB: <message>" on standard error, then the command's usage
 * line and "Run 'berth VERB --help' for its options.". Returns CLI_EXIT_USAGE.
 */
int cli_usage_error(const char *fmt, ...) _printf_(1, 2);

/*
 * cli_getopt() - getopt_long() over @argv with the conventions above (set optind = 0 before
 * the first call, which makes glibc start afresh):
 * "h" is added to @shortopts, and getopt's own messages are replaced by cli_usage_error()
 * ("unknown option '--x'", "--app needs a value"). Returns the option, -1 at the end,
 * CLI_OPT_HELP or CLI_OPT_BAD.
 */
int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts);
