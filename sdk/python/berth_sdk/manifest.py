# SPDX-License-Identifier: Apache-2.0
"""berth.yml as the Python runtime reads it (SPEC §1.6): the fields an app uses, extra
keys ignored. The full rule set is enforced by the host and by berth-init."""
import re
from typing import Any, Dict, List, Optional, Union

import yaml
from pydantic import BaseModel, ValidationError

NAME_RE = re.compile(r"^[a-z0-9-]+$")
VERSION_RE = re.compile(r"^\d+\.\d+\.\d+$")
MAX_MANIFEST_BYTES = 1 << 20


class ManifestError(Exception):
    pass


# A field is a type name ("string") or {type, description}; the host checks which (the
# exports grammar is in sdk/capability-model.json and docs/manifest.md).
FieldSpec = Union[str, Dict[str, Any]]


class ExportSpec(BaseModel):
    name: str
    description: Optional[str] = None
    title: Optional[str] = None
    input: Dict[str, FieldSpec] = {}
    output: Dict[str, FieldSpec] = {}


class Manifest(BaseModel):
    name: str
    version: str
    description: str = ""
    capabilities: List[str] = []
    exports: List[ExportSpec] = []
    on_install: List[str] = []
    on_agent_ready: List[str] = []
    runtime: Optional[str] = None


def _validate(model, value):
    if hasattr(model, "model_validate"):
        return model.model_validate(value)
    return model.parse_obj(value)


def load_manifest(path: str) -> Manifest:
    with open(path, "rb") as f:
        raw = f.read(MAX_MANIFEST_BYTES + 1)
    if len(raw) > MAX_MANIFEST_BYTES:
        raise ManifestError(f"invalid berth.yml ({path}): larger than 1 MiB")
    try:
        doc = yaml.safe_load(raw.decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ManifestError(f"invalid berth.yml ({path}): {e}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ManifestError(f"invalid berth.yml ({path}): expected a mapping at the top level")
    try:
        manifest = _validate(Manifest, doc)
    except ValidationError as e:
        raise ManifestError(f"invalid berth.yml ({path}): {e}") from None
    problems = []
    if not NAME_RE.match(manifest.name):
        problems.append("name: name must be lowercase alphanumeric with dashes")
    if not VERSION_RE.match(manifest.version):
        problems.append("version: version must be semver (x.y.z)")
    if problems:
        raise ManifestError(f"invalid berth.yml ({path}): " + "; ".join(problems))
    return manifest
