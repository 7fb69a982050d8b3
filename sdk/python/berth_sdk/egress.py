# SPDX-License-Identifier: Apache-2.0
"""configure_egress_proxy(): send this process's HTTP clients through the sandbox's egress
broker (BERTH_EGRESS_PROXY_URL), the Python counterpart of the Node SDK's
configureEgressProxy().

It sets the proxy variables that urllib, http.client-based libraries such as requests and
httpx, and pip read (HTTP_PROXY, HTTPS_PROXY and their lower-case forms), and installs a
urllib opener with that proxy, so urllib.request.urlopen() uses it too. https:// goes
through CONNECT with TLS end to end; http:// is sent as an absolute-URI request.
"""
import os
import urllib.request

_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")


def configure_egress_proxy() -> bool:
    """Route HTTP clients through BERTH_EGRESS_PROXY_URL. Returns whether a proxy was set;
    does nothing and returns False when the variable is unset (no egress declared)."""
    url = os.environ.get("BERTH_EGRESS_PROXY_URL")
    if not url:
        return False
    for name in _PROXY_VARIABLES:
        os.environ[name] = url
    # Loopback must never go through the broker (it would refuse it anyway).
    os.environ.setdefault("NO_PROXY", "localhost,127.0.0.1,::1")
    os.environ.setdefault("no_proxy", os.environ["NO_PROXY"])
    urllib.request.install_opener(
        urllib.request.build_opener(urllib.request.ProxyHandler({"http": url, "https": url})))
    return True
