# SPDX-License-Identifier: Apache-2.0
"""berth_sdk: write Berth apps in Python.

    from berth_sdk import define_app

    def setup(a):
        a.export("greet", greet, input_model=GreetInput, output_model=GreetOutput)

    app = define_app(setup)

Run with ``python3 -m berth_sdk.runtime`` (cwd = the app directory).
"""
from .app import AppContext, BerthApp, define_app
from .capability import matches_capability, request_capability
from .context_bus import ContextBusClient, LocalContextBus, create_local_context_bus
from .durable import write_file_durable
from .egress import configure_egress_proxy, github_proxies
from .semantic_fs import LocalSemanticFs, SemanticFsClient, SemanticFsError, connect_semantic_fs

__all__ = [
    "AppContext",
    "BerthApp",
    "ContextBusClient",
    "LocalContextBus",
    "LocalSemanticFs",
    "SemanticFsClient",
    "SemanticFsError",
    "connect_semantic_fs",
    "configure_egress_proxy",
    "github_proxies",
    "create_local_context_bus",
    "define_app",
    "matches_capability",
    "request_capability",
    "write_file_durable",
]
__version__ = "0.1.0"
