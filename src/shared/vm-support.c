/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "parse-util.h"
#include "vm-support.h"

typedef struct Unsupported {
	const char *ns, *action; /* NULL action: any */
	const char *why;
} Unsupported;

/* What the VM has no broker or device for; every other capability is enforced or recorded. */
static const Unsupported unsupported[] = {
	{"network", "peer", "the VM has no mesh network (WireGuard) daemon"},
	{"browser", NULL, "the VM has no browser layer"},
	{"github", NULL, "the VM has no GitHub API broker"},
};

int vm_support_check(const Manifest *m, char **reason)
{
	const char *const *caps;
	size_t n = manifest_capabilities(m, &caps);

	*reason = NULL;
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *ns = NULL, *action = NULL, *scope = NULL;

		if (capability_parse(caps[i], &ns, &action, &scope) < 0)
			continue;
		if (streq(ns, "network") && !streq(action, "connect") && !streq(action, "host") &&
		    !streq(action, "peer")) {
			if (asprintf(
				    reason,
				    "\"%s\" in %s's berth.yml: the VM runtime supports network:connect:<port> and network:host:<host> only; remove it or change it to one of those (see docs/vm.md)",
				    caps[i], manifest_name(m)) < 0)
				*reason = NULL;
			return -EOPNOTSUPP;
		}
		for (size_t k = 0; k < ELEMENTSOF(unsupported); k++) {
			if (!streq(ns, unsupported[k].ns) ||
			    (unsupported[k].action && !streq(action, unsupported[k].action)))
				continue;
			if (asprintf(
				    reason,
				    "\"%s\" in %s's berth.yml cannot run in the VM: %s. Remove the capability to run the app here (see docs/vm.md)",
				    caps[i], manifest_name(m), unsupported[k].why) < 0)
				*reason = NULL;
			return -EOPNOTSUPP;
		}
	}
	return 0;
}

void vm_egress_allow_free(char **allow)
{
	for (size_t i = 0; allow && allow[i]; i++)
		free(allow[i]);
	free(allow);
}

static bool egress_scope(const char *ns, const char *action)
{
	return (streq(ns, "network") && streq(action, "host")) ||
	       (streq(ns, "browser") && streq(action, "navigate"));
}

/*
 * A scope as the dialer takes it (docs/egress.md): split at the last ':' when digits or
 * "*" follow; the host a glob of [a-z0-9.*-] (at most 253) or an IPv6 address in
 * brackets. Returns a malloc()ed pattern with the host lowercased, or NULL (errno EINVAL
 * or ENOMEM).
 */
static char *egress_pattern(const char *scope)
{
	const char *colon = strrchr(scope, ':'), *port = NULL;
	size_t host_len = strlen(scope);
	_cleanup_free_ char *host = NULL;
	char *out = NULL;

	if (colon && (streq(colon + 1, "*") ||
		      (colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1)))) {
		port = colon + 1;
		host_len = (size_t)(colon - scope);
		if (!streq(port, "*") && parse_port(port, strlen(port), &(uint16_t){0}) < 0) {
			errno = EINVAL;
			return NULL;
		}
	}
	host = strndup(scope, host_len);
	if (!host)
		return NULL;
	for (char *c = host; *c; c++)
		if (*c >= 'A' && *c <= 'Z')
			*c = (char)(*c - 'A' + 'a');
	if (host_len >= 2 && host[0] == '[' && host[host_len - 1] == ']') {
		struct in6_addr a;

		host[host_len - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &a) != 1) {
			errno = EINVAL;
			return NULL;
		}
		host[host_len - 1] = ']';
	} else if (host_len == 0 || host_len > 253 ||
		   strspn(host, "abcdefghijklmnopqrstuvwxyz0123456789.-*") != host_len) {
		errno = EINVAL;
		return NULL;
	}
	if (asprintf(&out, "%s%s%s", host, port ? ":" : "", port ? port : "") < 0)
		return NULL;
	return out;
}

static bool declares_broker_port(const Manifest *m)
{
	const char *const *caps;
	size_t n = manifest_capabilities(m, &caps);

	for (size_t i = 0; i < n; i++)
		if (streq(caps[i], "network:connect:8090") || streq(caps[i], "network:connect:*"))
			return true;
	return false;
}

int vm_egress_plan(const Manifest *const *apps, size_t n, char ***ret_allow, char **ret_warning,
		   char **reason)
{
	char **allow = calloc(VM_EGRESS_PATTERNS_MAX + 1, sizeof(char *));
	_cleanup_free_ char *names = NULL;
	size_t n_allow = 0, n_egress = 0;
	const Manifest *egress_app = NULL;

	*reason = NULL;
	*ret_warning = NULL;
	if (!allow)
		return -ENOMEM;
	for (size_t a = 0; a < n; a++) {
		const char *const *caps;
		size_t nc = manifest_capabilities(apps[a], &caps);
		bool declares = false;

		for (size_t i = 0; i < nc; i++) {
			_cleanup_free_ char *ns = NULL, *action = NULL, *scope = NULL;
			char *p;
			bool dup = false;

			if (capability_parse(caps[i], &ns, &action, &scope) < 0 ||
			    !egress_scope(ns, action))
				continue;
			declares = true;
			p = egress_pattern(scope);
			if (!p && errno == ENOMEM)
				goto nomem;
			if (!p) {
				if (asprintf(
					    reason,
					    "\"%s\" in %s's berth.yml cannot be reached from the VM: its egress takes a host name or IPv4 address ('*' may stand for any run of characters), or an IPv6 address in brackets, optionally followed by :PORT (1-65535) or :*. Change the scope (see docs/egress.md)",
					    caps[i], manifest_name(apps[a])) < 0)
					*reason = NULL;
				vm_egress_allow_free(allow);
				return -EOPNOTSUPP;
			}
			for (size_t k = 0; k < n_allow && !dup; k++)
				dup = streq(allow[k], p);
			if (dup) {
				free(p);
				continue;
			}
			if (n_allow >= VM_EGRESS_PATTERNS_MAX) {
				free(p);
				if (asprintf(
					    reason,
					    "%s's berth.yml names more than %d egress hosts, more than berth-vmm takes; use '*' globs to cover several with one scope",
					    manifest_name(apps[a]), VM_EGRESS_PATTERNS_MAX) < 0)
					*reason = NULL;
				vm_egress_allow_free(allow);
				return -EOPNOTSUPP;
			}
			allow[n_allow++] = p;
		}
		if (!declares)
			continue;
		egress_app = apps[a];
		n_egress++;
		{
			char *next = NULL;

			if (asprintf(&next, "%s%s%s", names ? names : "", names ? ", " : "",
				     manifest_name(apps[a])) < 0)
				goto nomem;
			free(names);
			names = next;
		}
	}
	if (n_egress > 1) {
		if (asprintf(
			    reason,
			    "at most one app may declare a browser:navigate:*/network:host:* capability when running multiple apps together — found %zu: %s",
			    n_egress, names) < 0)
			*reason = NULL;
		vm_egress_allow_free(allow);
		return -EOPNOTSUPP;
	}
	if (egress_app && !declares_broker_port(egress_app) &&
	    asprintf(
		    ret_warning,
		    "%s declares network:host: but not network:connect:8090, so the kernel (Landlock) will keep it from reaching the egress broker on 127.0.0.1:8090 and its requests will fail; add network:connect:8090 to its berth.yml",
		    manifest_name(egress_app)) < 0)
		*ret_warning = NULL;
	*ret_allow = allow;
	return (int)n_allow;
nomem:
	vm_egress_allow_free(allow);
	return -ENOMEM;
}
