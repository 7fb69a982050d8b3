/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "source-dir.h"

int berth_source_path(const char *rel, char **ret)
{
	const char *roots[] = {getenv("BERTH_SOURCE_DIR"), BERTH_BUILT_FROM};

	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		char *p = NULL;

		if (!roots[i] || !*roots[i])
			continue;
		if (asprintf(&p, "%s/%s", roots[i], rel) < 0)
			return -ENOMEM;
		if (access(p, F_OK) == 0) {
			*ret = p;
			return 0;
		}
		free(p);
	}
	return -ENOENT;
}
