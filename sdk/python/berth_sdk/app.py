# SPDX-License-Identifier: Apache-2.0
"""define_app and the app object an entry module exposes as ``app``."""
import inspect
from typing import Any, Callable, Dict, List, Optional


class ExportDef:
    __slots__ = ("name", "handler", "input_model", "output_model", "takes_input")

    def __init__(self, name: str, handler: Callable, input_model=None, output_model=None):
        self.name = name
        self.handler = handler
        self.input_model = input_model
        self.output_model = output_model
        self.takes_input = _accepts_argument(handler)


def _accepts_argument(fn: Callable) -> bool:
    """Whether ``fn`` can be called with one positional argument (the input)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return True
    for p in params:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL):
            return True
    return False


class AppContext:
    """What on_agent_ready hooks receive."""

    def __init__(self, manifest, context_bus, semantic_fs=None):
        self.manifest = manifest
        self.context_bus = context_bus
        # The semantic-fs client (berth_sdk.semantic_fs): tag and query /context.
        self.semantic_fs = semantic_fs


class BerthApp:
    def __init__(self):
        self._exports: Dict[str, ExportDef] = {}
        self._install_hooks: List[Callable[[], Any]] = []
        self._ready_hooks: List[Callable[[AppContext], Any]] = []

    def export(self, name: str, handler: Callable, input_model=None, output_model=None) -> None:
        """Register an export. ``handler(input)`` gets the input parsed by ``input_model``
        (a pydantic BaseModel) when one is given, else the raw JSON value; a handler
        that takes no argument is called without one."""
        if not isinstance(name, str) or not name:
            raise TypeError("export() needs a non-empty string name")
        if not callable(handler):
            raise TypeError(f'export "{name}" needs a callable handler')
        if name in self._exports:
            raise ValueError(f'export "{name}" is already registered')
        self._exports[name] = ExportDef(name, handler, input_model, output_model)

    def on_install(self, fn: Callable[[], Any]) -> None:
        self._install_hooks.append(fn)

    def on_agent_ready(self, fn: Callable[[AppContext], Any]) -> None:
        self._ready_hooks.append(fn)

    @property
    def export_names(self) -> List[str]:
        return list(self._exports)

    def get_export(self, name: str) -> Optional[ExportDef]:
        return self._exports.get(name)


def define_app(setup: Callable[[BerthApp], None]) -> BerthApp:
    app = BerthApp()
    setup(app)
    return app
