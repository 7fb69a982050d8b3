# SPDX-License-Identifier: Apache-2.0
"""Capability strings (``namespace:action:scope``), the filesystem scope rules (SPEC 1.3,
1.4), their glob match, and request_capability(). The tables come from
capability-model.json, which the C implementation (src/capability) is generated from too;
test/capability/corpus.json holds the cases every implementation must answer alike."""
import json
import os
import re
import urllib.request
from typing import Dict, List, Optional

# Where the model's tables are: beside the package's modules in the image (vm/rootfs/build.sh
# puts them there), else sdk/capability-model.json in a Berth checkout.
_HERE = os.path.dirname(os.path.abspath(__file__))
MODEL_PATHS = (os.path.join(_HERE, "capability-model.json"),
               os.path.join(os.path.dirname(os.path.dirname(_HERE)), "capability-model.json"))


def _load_model():
    for path in MODEL_PATHS:
        try:
            with open(path, encoding="utf-8") as f:
                return json.load(f)
        except FileNotFoundError:
            continue
    raise RuntimeError("berth_sdk: the capability model's tables are missing; looked for "
                       + " and ".join(MODEL_PATHS))


MODEL = _load_model()
ALLOWED_FILESYSTEM_SCOPE_PREFIXES = tuple(MODEL["filesystemPrefixes"])
_PREFIXES_TEXT = ", ".join(ALLOWED_FILESYSTEM_SCOPE_PREFIXES)

# The scope is any characters but a line terminator (\n, \r, U+2028, U+2029), as in C and
# in JavaScript's "."; Python's "." would let \r and U+2028/U+2029 through, and its "$"
# a trailing \n.
_NOT_LINE_BREAK = r"[^\n\r\u2028\u2029]"
CAPABILITY_RE = re.compile(r"^[a-z0-9_-]+:[a-z0-9_-]+:" + _NOT_LINE_BREAK + r"+\Z")
GRANTS_TIMEOUT_S = 3.0


def parse_capability(cap: str):
    parts = cap.split(":")
    if len(parts) < 3:
        # A NUL is shown as \0, as the C implementation shows it.
        shown = cap.replace("\0", "\\0")
        raise ValueError(f"invalid capability string \"{shown}\": expected 'namespace:action:scope'")
    return parts[0], parts[1], ":".join(parts[2:])


def scope_matches(pattern: str, value: str) -> bool:
    """``*`` matches any run of characters but a line break; everything else, ``?``
    included, is literal."""
    regex = (_NOT_LINE_BREAK + "*").join(re.escape(p) for p in pattern.split("*")) + r"\Z"
    return re.match(regex, value) is not None


def matches_capability(granted: str, requested: str) -> bool:
    if not (isinstance(granted, str) and isinstance(requested, str)):
        return False
    if not CAPABILITY_RE.match(granted) or not CAPABILITY_RE.match(requested):
        return False
    g = parse_capability(granted)
    r = parse_capability(requested)
    return g[0] == r[0] and g[1] == r[1] and scope_matches(g[2], r[2])


def _quote(s: str) -> str:
    """``s`` as JavaScript's JSON.stringify() quotes it."""
    return json.dumps(s, ensure_ascii=False)


def filesystem_scope_issue(scope: str) -> Optional[str]:
    """The first problem with a filesystem capability's scope, or None when it is fine."""
    if "\0" in scope:
        return "filesystem path must not contain a null byte"
    if not scope.startswith("/"):
        return f'filesystem path must be absolute (start with "/"), got {_quote(scope)}'
    base = scope[:-2] if scope.endswith("/*") else scope
    if "*" in base:
        return ('filesystem path may only use a trailing "/*" glob (a "*" anywhere else becomes'
                f' a literal directory name), got {_quote(scope)}')
    if base in ("/", ""):
        return ("filesystem:*:/ would grant the entire container filesystem — declare a path under "
                f"{_PREFIXES_TEXT} instead")
    if any(s in ("", ".", "..") for s in base[1:].split("/")):
        return ('filesystem path must be canonical — no empty, "." or ".." segments, and no trailing'
                f' slash — got {_quote(scope)}')
    if not any(base == p or base.startswith(p + "/") for p in ALLOWED_FILESYSTEM_SCOPE_PREFIXES):
        return f"filesystem path must be {_PREFIXES_TEXT} or a path beneath one of them, got {_quote(scope)}"
    return None


def capability_issue(cap: str) -> Optional[str]:
    """What is wrong with a capability, as a manifest reports it: fewer than three parts,
    or a filesystem:read/write scope that breaks the scope rules; None otherwise. Not the
    grammar: check CAPABILITY_RE first."""
    try:
        ns, action, scope = parse_capability(cap)
    except ValueError as err:
        return str(err)
    if ns == "filesystem" and action in ("read", "write"):
        return filesystem_scope_issue(scope)
    return None


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
