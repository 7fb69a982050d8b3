# SPDX-License-Identifier: Apache-2.0
"""configure_egress_proxy(): send this process's HTTP clients through the sandbox's
proxies, the Python counterpart of the Node SDK's configureEgressProxy(): api.github.com
through the GitHub broker (BERTH_GITHUB_API_PROXY), every other host through the egress
broker (BERTH_EGRESS_PROXY_URL).

It installs a urllib opener that picks the proxy by host, so urllib.request.urlopen() uses
the right one, and sets the proxy variables that requests, httpx and pip read (HTTP_PROXY,
HTTPS_PROXY and their lower-case forms). Those name one proxy for every host: the egress
broker's when there is one, else the GitHub broker's. An app with both that uses requests
passes github_proxies() for its GitHub calls. https:// goes through CONNECT; http:// is
sent as an absolute-URI request.
"""
import os
import urllib.parse
import urllib.request

_PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
GITHUB_API_HOST = "api.github.com"


class _RoutingProxyHandler(urllib.request.BaseHandler):
    """Sends each request through the proxy its host has (None: directly)."""

    handler_order = 100  # before the HTTP(S) handlers, as urllib's ProxyHandler

    def __init__(self, egress, github):
        self.egress = egress
        self.github = github

    def _route(self, req):
        host = (urllib.parse.urlsplit(req.full_url).hostname or "").lower()
        proxy = self.github if host == GITHUB_API_HOST and self.github else self.egress
        if proxy and host not in ("localhost", "127.0.0.1", "::1"):
            req.set_proxy(urllib.parse.urlsplit(proxy).netloc, "http")
        return None

    def http_open(self, req):
        return self._route(req)

    def https_open(self, req):
        return self._route(req)


def github_proxies():
    """The proxies mapping for requests' GitHub calls ({"https": ...}), or None."""
    url = os.environ.get("BERTH_GITHUB_API_PROXY")
    return {"https": url, "http": url} if url else None


def configure_egress_proxy() -> bool:
    """Route HTTP clients through the sandbox's proxies. Returns whether a proxy was set;
    does nothing and returns False when neither BERTH_EGRESS_PROXY_URL nor
    BERTH_GITHUB_API_PROXY is set."""
    egress = os.environ.get("BERTH_EGRESS_PROXY_URL") or None
    github = os.environ.get("BERTH_GITHUB_API_PROXY") or None
    if not egress and not github:
        return False
    for name in _PROXY_VARIABLES:
        os.environ[name] = egress or github
    # Loopback must never go through a broker (it would refuse it anyway).
    os.environ.setdefault("NO_PROXY", "localhost,127.0.0.1,::1")
    os.environ.setdefault("no_proxy", os.environ["NO_PROXY"])
    # ProxyHandler({}): no proxy from the variables above; the router decides.
    urllib.request.install_opener(urllib.request.build_opener(
        urllib.request.ProxyHandler({}), _RoutingProxyHandler(egress, github)))
    return True
