# SPDX-License-Identifier: Apache-2.0
"""Capability strings (``namespace:action:scope``), their glob match, and
request_capability()."""
import json
import os
import re
import urllib.request
from typing import Dict, List, Optional

CAPABILITY_RE = re.compile(r"^[a-z0-9_-]+:[a-z0-9_-]+:.+$", re.DOTALL)
GRANTS_TIMEOUT_S = 3.0


def parse_capability(cap: str):
    parts = cap.split(":")
    if len(parts) < 3:
        raise ValueError(f"invalid capability string \"{cap}\": expected 'namespace:action:scope'")
    return parts[0], parts[1], ":".join(parts[2:])


def scope_matches(pattern: str, value: str) -> bool:
    """``*`` matches any run of characters; everything else, ``?`` included, is literal."""
    regex = "^" + ".*".join(re.escape(p) for p in pattern.split("*")) + "$"
    return re.match(regex, value, re.DOTALL) is not None


def matches_capability(granted: str, requested: str) -> bool:
    if not (isinstance(granted, str) and isinstance(requested, str)):
        return False
    if not CAPABILITY_RE.match(granted) or not CAPABILITY_RE.match(requested):
        return False
    g = parse_capability(granted)
    r = parse_capability(requested)
    return g[0] == r[0] and g[1] == r[1] and scope_matches(g[2], r[2])


def _declared_from_policy() -> Optional[List[str]]:
    path = os.environ.get("BERTH_CAPABILITY_POLICY") or os.path.join(os.getcwd(), ".berth", "capability-policy.json")
    try:
        with open(path, encoding="utf-8") as f:
            policy = json.load(f)
    except (OSError, ValueError):
        return None
    caps = policy.get("declaredCapabilities") if isinstance(policy, dict) else None
    return [c for c in caps if isinstance(c, str)] if isinstance(caps, list) else None


def _declared_from_manifest() -> List[str]:
    path = os.environ.get("BERTH_MANIFEST_PATH") or os.path.join(os.getcwd(), "berth.yml")
    try:
        import yaml

        with open(path, encoding="utf-8") as f:
            doc = yaml.safe_load(f)
    except Exception:
        return []
    caps = doc.get("capabilities") if isinstance(doc, dict) else None
    return [c for c in caps if isinstance(c, str)] if isinstance(caps, list) else []


def request_capability(app_name: str, capability: str) -> Dict[str, bool]:
    """Whether ``capability`` is covered by what the app declared (the compiled policy,
    else berth.yml). If not, and BERTH_GRANTS_SERVER_URL is set, the request is sent
    there and ``pending`` says whether it was accepted for review."""
    declared = _declared_from_policy()
    if declared is None:
        declared = _declared_from_manifest()
    if any(matches_capability(d, capability) for d in declared):
        return {"granted": True}
    url = os.environ.get("BERTH_GRANTS_SERVER_URL")
    if not url:
        return {"granted": False}
    body = json.dumps({"appName": app_name, "capability": capability}).encode()
    req = urllib.request.Request(url.rstrip("/") + "/grants", data=body, method="POST",
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=GRANTS_TIMEOUT_S) as res:
            return {"granted": False, "pending": 200 <= res.status < 300}
    except Exception:
        return {"granted": False, "pending": False}
