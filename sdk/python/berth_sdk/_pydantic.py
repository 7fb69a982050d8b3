# SPDX-License-Identifier: Apache-2.0
"""The few pydantic calls the SDK makes, for pydantic 1.10 (Debian 12) and 2.x alike."""
import json


def is_model(value) -> bool:
    return hasattr(value, "__fields__") or hasattr(value, "model_fields")


def validate(model, value):
    if hasattr(model, "model_validate"):
        return model.model_validate(value)
    if isinstance(value, model):
        return value
    return model.parse_obj(value)


def to_jsonable(value):
    """A pydantic model as plain JSON values (dates become strings, as in .json())."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return json.loads(value.json())
