/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fileio.h"
#include "macros.h"
#include "paths.h"

typedef struct ConfigSetting {
	const char *flag;     /* how the command line sets it */
	const char *env;      /* environment variable, NULL for none */
	const char *file_key; /* dotted path in config.json */
	size_t offset;	      /* of the char * in BerthConfig */
	const char *def;      /* built-in default, NULL or "" for none */
} ConfigSetting;

static const ConfigSetting settings[_CONFIG_KEY_MAX] = {
	[CONFIG_ARTIFACTS_URL] = {"--url", "BERTH_VM_ARTIFACTS_URL", "vm.artifactsUrl",
				  offsetof(BerthConfig, vm_artifacts_url),
				  CONFIG_ARTIFACTS_URL_DEFAULT},
	[CONFIG_ARTIFACTS_DIR] = {"--from", "BERTH_VMM_ARTIFACTS", "vm.artifactsDir",
				  offsetof(BerthConfig, vm_artifacts_dir), NULL},
	[CONFIG_VMM] = {"--vmm", "BERTH_VMM", "vm.vmm", offsetof(BerthConfig, vm_vmm), NULL},
	[CONFIG_SANDBOX] = {"--runtime", "BERTH_SANDBOX", "sandbox", offsetof(BerthConfig, sandbox),
			    NULL},
	[CONFIG_ACCEL] = {"--accel", "BERTH_ACCEL", "vm.accel", offsetof(BerthConfig, vm_accel),
			  "auto"},
	[CONFIG_QEMU] = {"--qemu", "BERTH_QEMU", "vm.qemu", offsetof(BerthConfig, vm_qemu),
			 "qemu-system-x86_64"},
};

typedef int (*FieldCheck)(const char *value);

/* One JSON key: which object it lives in ("" for the top level) and where it goes. */
typedef struct ConfigField {
	const char *object;
	const char *key;
	ConfigKey setting;
	int expand_home; /* a path: "~/" means $HOME */
	FieldCheck check;
	const char *expected; /* for the error when @check fails */
} ConfigField;

static int check_sandbox(const char *value)
{
	return streq(value, "vm") || streq(value, "docker");
}

static int check_accel(const char *value)
{
	return streq(value, "auto") || streq(value, "kvm") || streq(value, "tcg");
}

static const ConfigField fields[] = {
	{"", "sandbox", CONFIG_SANDBOX, 0, check_sandbox, "\"vm\" or \"docker\""},
	{"vm", "artifactsUrl", CONFIG_ARTIFACTS_URL, 0, NULL, NULL},
	{"vm", "artifactsDir", CONFIG_ARTIFACTS_DIR, 1, NULL, NULL},
	{"vm", "vmm", CONFIG_VMM, 1, NULL, NULL},
	{"vm", "accel", CONFIG_ACCEL, 0, check_accel, "\"auto\", \"kvm\" or \"tcg\""},
	{"vm", "qemu", CONFIG_QEMU, 1, NULL, NULL},
};

static char **config_slot(BerthConfig *c, ConfigKey key)
{
	return (char **)((char *)c + settings[key].offset);
}

static const char *config_value(const BerthConfig *c, ConfigKey key)
{
	return *(char *const *)((const char *)c + settings[key].offset);
}

_printf_(4, 5) static int config_fail(ConfigError *e, const char *key, int err, const char *fmt,
				      ...)
{
	va_list ap;

	snprintf(e->key, sizeof(e->key), "%s", key ? key : "");
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	return err;
}

static char *expand_home(const char *value)
{
	const char *home = getenv("HOME");
	char *p = NULL;

	if (!strneq(value, "~/", 2) || !home || *home != '/')
		return strdup(value);
	if (asprintf(&p, "%s/%s", home, value + 2) < 0)
		return NULL;
	return p;
}

static int config_take_field(BerthConfig *c, const ConfigField *f, json_t *v, ConfigError *e)
{
	char dotted[64];
	const char *s;
	char **slot;

	snprintf(dotted, sizeof(dotted), "%s%s%s", f->object, *f->object ? "." : "", f->key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return config_fail(e, dotted, -EBADMSG, "%s must be a string", dotted);
	s = json_string_value(v);
	if (!*s)
		return 0;
	if (f->check && !f->check(s))
		return config_fail(e, dotted, -EBADMSG, "%s must be %s, not \"%.64s\"", dotted,
				   f->expected, s);
	slot = config_slot(c, f->setting);
	*slot = f->expand_home ? expand_home(s) : strdup(s);
	return *slot ? 0 : -ENOMEM;
}

/* Keys of "vm" that no field claims are an error: a typo there would be silently ignored. */
static int config_check_vm_keys(json_t *vm, ConfigError *e)
{
	const char *key;
	json_t *v;

	json_object_foreach(vm, key, v) {
		int known = 0;

		for (size_t i = 0; i < ELEMENTSOF(fields); i++)
			if (streq(fields[i].object, "vm") && streq(fields[i].key, key))
				known = 1;
		if (!known)
			return config_fail(
				e, "vm", -EBADMSG,
				"unknown key \"vm.%.48s\" (known: vm.artifactsUrl, vm.artifactsDir, vm.vmm, vm.accel, vm.qemu)",
				key);
	}
	return 0;
}

static int config_dispatch(BerthConfig *c, json_t *doc, ConfigError *e)
{
	json_t *vm;
	int r;

	if (!json_is_object(doc))
		return config_fail(e, NULL, -EBADMSG, "the file must hold a JSON object");
	vm = json_object_get(doc, "vm");
	if (vm && !json_is_null(vm)) {
		if (!json_is_object(vm))
			return config_fail(e, "vm", -EBADMSG, "vm must be an object");
		r = config_check_vm_keys(vm, e);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
		json_t *obj = *fields[i].object ? json_object_get(doc, fields[i].object) : doc;

		r = config_take_field(
			c, &fields[i],
			json_is_object(obj) ? json_object_get(obj, fields[i].key) : NULL, e);
		if (r < 0)
			return r;
	}
	return 0;
}

int config_load(const char *path, BerthConfig *ret, ConfigError *reterr)
{
	_cleanup_(json_decrefp) json_t *doc = NULL;
	_cleanup_free_ char *buf = NULL, *resolved = NULL;
	BerthConfig c = {};
	ConfigError e = {};
	json_error_t jerr;
	size_t size = 0;
	int r;

	c.path = path ? strdup(path) : berth_config_path();
	if (!c.path)
		return -ENOMEM;
	snprintf(e.file, sizeof(e.file), "%s", c.path);
	/* Dotfile managers symlink config files, and read_full_file() does not follow a final
	 * symlink, so read the resolved path. */
	resolved = realpath(c.path, NULL);
	r = resolved ? read_full_file(resolved, CONFIG_SIZE_MAX, &buf, &size) : -errno;
	if (r == -ENOENT) {
		*ret = c;
		return 0;
	}
	if (r == -EFBIG)
		r = config_fail(&e, NULL, r, "larger than %d KiB, which no config file is",
				CONFIG_SIZE_MAX / 1024);
	else if (r < 0)
		r = config_fail(&e, NULL, r, "cannot read it: %s", strerror(-r));
	if (r >= 0) {
		doc = json_loadb(buf, size, JSON_REJECT_DUPLICATES, &jerr);
		if (!doc) {
			e.line = jerr.line > 0 ? jerr.line : 0;
			e.column = jerr.column > 0 ? jerr.column : 0;
			r = config_fail(&e, NULL, -EBADMSG, "%s", jerr.text);
		}
	}
	if (r >= 0)
		r = config_dispatch(&c, doc, &e);
	if (r < 0) {
		config_done(&c);
		memset(ret, 0, sizeof(*ret));
		if (reterr)
			*reterr = e;
		return r;
	}
	*ret = c;
	return 0;
}

void config_done(BerthConfig *c)
{
	if (!c)
		return;
	free(c->path);
	for (int k = 0; k < _CONFIG_KEY_MAX; k++)
		free(*config_slot(c, k));
	memset(c, 0, sizeof(*c));
}

const char *config_get(const BerthConfig *c, ConfigKey key, const char *flag,
		       ConfigSource *ret_source)
{
	const ConfigSetting *s;
	ConfigSource source = CONFIG_SOURCE_NONE;
	const char *v = NULL, *env;

	if (key < 0 || key >= _CONFIG_KEY_MAX)
		return NULL;
	s = &settings[key];
	env = s->env ? getenv(s->env) : NULL;
	if (flag && *flag) {
		v = flag;
		source = CONFIG_SOURCE_FLAG;
	} else if (env && *env) {
		v = env;
		source = CONFIG_SOURCE_ENV;
	} else if (c && config_value(c, key)) {
		v = config_value(c, key);
		source = CONFIG_SOURCE_FILE;
	} else if (s->def && *s->def) {
		v = s->def;
		source = CONFIG_SOURCE_DEFAULT;
	}
	if (ret_source)
		*ret_source = source;
	return v;
}

const char *config_key_env(ConfigKey key)
{
	if (key < 0 || key >= _CONFIG_KEY_MAX)
		return NULL;
	return settings[key].env;
}

char *config_source_describe(const BerthConfig *c, ConfigKey key, ConfigSource source)
{
	const ConfigSetting *s;
	char *p = NULL;
	int r = -1;

	if (key < 0 || key >= _CONFIG_KEY_MAX)
		return NULL;
	s = &settings[key];
	switch (source) {
	case CONFIG_SOURCE_FLAG:
		return strdup(s->flag);
	case CONFIG_SOURCE_ENV:
		return strdup(s->env);
	case CONFIG_SOURCE_FILE:
		r = asprintf(&p, "%s in %s", s->file_key,
			     c && c->path ? c->path : "~/.berth/config.json");
		break;
	case CONFIG_SOURCE_DEFAULT:
		return strdup("the built-in default");
	case CONFIG_SOURCE_NONE:
		r = asprintf(&p, "%s", s->flag);
		break;
	case _CONFIG_SOURCE_MAX:
	case _CONFIG_SOURCE_INVALID:
		break;
	}
	return r < 0 ? NULL : p;
}

void config_error_format(const ConfigError *e, char *buf, size_t len)
{
	char where[64] = "";

	if (e->line > 0)
		snprintf(where, sizeof(where), ":%d:%d", e->line, e->column);
	snprintf(
		buf, len,
		"%s%s: %s; fix the file (it is JSON, for example {\"vm\": {\"artifactsDir\": \"/path/to/out/artifacts\"}}) or move it aside",
		e->file, where, e->message);
}
