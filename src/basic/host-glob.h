/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>

/*
 * The host patterns of network:host: and browser:navigate: scopes (SPEC §6.1), as both the
 * guest's egress broker and the host's egress dialer match them, so the two checks can
 * never disagree: anchored, '*' matches any run of characters (dots included), every
 * other character, '?' and '[' included, only itself. Callers lowercase both sides.
 * Never recursive; at worst strlen(glob) * strlen(s) steps, and both are capped.
 */
bool host_glob_match(const char *glob, const char *s);
