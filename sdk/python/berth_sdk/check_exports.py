# SPDX-License-Identifier: Apache-2.0
"""berth test's stub invocation (SPEC 2.9): every export of berth.yml called once, in
process, with inputs made from its declared fields, and one JSON line of results."""

HINTS = {"url": "https://example.com", "selector": "body", "email": "test@example.com"}


def stub_value(name, spec):
    """A stub value for one declared field: its type name, or {type, ...}."""
    kind = spec if isinstance(spec, str) else (spec or {}).get("type")
    if kind in ("number", "integer"):
        return 1
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        props = spec.get("properties") if isinstance(spec, dict) else None
        return stub_input(props) if isinstance(props, dict) else {}
    return HINTS.get(name, "berth-test-stub")


def stub_input(fields):
    return {k: stub_value(k, v) for k, v in (fields or {}).items()}


def check_exports(manifest, app, mismatch, invoke):
    """{ok, results: [{export, ok, error?}]}; @mismatch fails the run before any call.
    @invoke(app, request) answers one request as the RPC layer does."""
    if mismatch:
        return {"ok": False, "error": mismatch, "results": []}
    results = []
    for e in manifest.exports:
        resp = invoke(app, {"id": e.name, "export": e.name, "input": stub_input(e.input)})
        if "error" in resp and resp["error"] is not None:
            results.append({"export": e.name, "ok": False, "error": resp["error"]})
        else:
            results.append({"export": e.name, "ok": True})
    return {"ok": all(r["ok"] for r in results), "results": results}
