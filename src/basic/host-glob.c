/* SPDX-License-Identifier: Apache-2.0 */
#include <stddef.h>

#include "host-glob.h"

bool host_glob_match(const char *glob, const char *s)
{
	const char *star = NULL, *resume = NULL;

	/* Greedy, backtracking only to the last '*'. */
	while (*s) {
		if (*glob == '*') {
			star = glob++;
			resume = s;
		} else if (*glob == *s) {
			glob++;
			s++;
		} else if (star) {
			glob = star + 1;
			s = ++resume;
		} else
			return false;
	}
	while (*glob == '*')
		glob++;
	return *glob == '\0';
}
