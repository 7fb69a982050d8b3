/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * IPv6 flow label requests (linux/in6.h, unchanged since 2.6): that header clashes with
 * glibc's netinet/in.h, which has none of it.
 */

#include <netinet/in.h>
#include <stdint.h>

struct in6_flowlabel_request {
	struct in6_addr dst;
	uint32_t label;
	uint8_t action, share;
	uint16_t flags, expires, linger;
	uint32_t pad;
};

#define IPV6_FLOWLABEL_MGR_OPT 32
#define IPV6_FL_ACTION_GET 0
#define IPV6_FL_SHARE_EXCL 1
#define IPV6_FL_FLAG_CREATE 1
#define IPV6_FL_FLAG_EXCL 2

#ifndef UDP_ENCAP_L2TPINUDP
#define UDP_ENCAP_L2TPINUDP 3
#endif
