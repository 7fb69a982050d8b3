# SPDX-License-Identifier: Apache-2.0
"""hello-world-py: greets, and tells other apps about a file on the context bus."""
import sys

from pydantic import BaseModel

from berth_sdk import define_app


class GreetInput(BaseModel):
    name: str


class GreetOutput(BaseModel):
    message: str


class FileCreatedInput(BaseModel):
    path: str
    created_by: str


_bus = None


def greet(inp: GreetInput) -> GreetOutput:
    return GreetOutput(message=f"Hello, {inp.name}! (from a real Python resident app)")


def publish_file_created(inp: FileCreatedInput) -> None:
    if _bus is None:
        raise RuntimeError("the context bus is not connected yet")
    _bus.publish("fs.file_created", {"path": inp.path, "createdBy": inp.created_by})


def on_agent_ready(ctx) -> None:
    global _bus
    _bus = ctx.context_bus
    _bus.register(ctx.manifest.name)
    print(f"[hello-world-py] registered on the context bus as {ctx.manifest.name!r}", file=sys.stderr)


def setup(a) -> None:
    a.export("greet", greet, input_model=GreetInput, output_model=GreetOutput)
    a.export("publish_file_created", publish_file_created, input_model=FileCreatedInput)
    a.on_agent_ready(on_agent_ready)


app = define_app(setup)
