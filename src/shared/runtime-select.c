/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "macros.h"
#include "runtime-select.h"

int runtime_select(const char *flag, char **reason)
{
	BerthConfig cfg = {};
	ConfigError cerr = {};
	ConfigSource source = CONFIG_SOURCE_NONE;
	const char *value, *where;
	int r = SANDBOX_VM;

	*reason = NULL;
	if (config_load(NULL, &cfg, &cerr) < 0) {
		if (asprintf(reason, "%s:%d:%d: %s; fix or remove the file", cerr.file, cerr.line,
			     cerr.column, cerr.message) < 0)
			*reason = NULL;
		return -EINVAL;
	}
	value = config_get(&cfg, CONFIG_SANDBOX, flag, &source);
	where = source == CONFIG_SOURCE_FLAG  ? "--runtime"
		: source == CONFIG_SOURCE_ENV ? "BERTH_SANDBOX"
					      : cfg.path;
	if (!value || !*value || streq(value, "vm"))
		r = SANDBOX_VM;
	else if (streq(value, "docker")) {
		r = SANDBOX_DOCKER;
	} else {
		if (asprintf(reason, "unknown sandbox runtime \"%s\" (from %s): use vm or docker",
			     value, where) < 0)
			*reason = NULL;
		r = -EINVAL;
	}
	if (r >= 0 && asprintf(reason, "%s (%s)", r == SANDBOX_DOCKER ? "docker" : "vm",
			       value && *value ? where : "the default") < 0)
		*reason = NULL;
	config_done(&cfg);
	return r;
}
