"""{{name}}: every export here must also be listed under `exports:` in berth.yml."""
from pydantic import BaseModel

from berth_sdk import define_app


class PingOutput(BaseModel):
    message: str


def ping() -> PingOutput:
    return PingOutput(message="pong")


def setup(a):
    a.export("ping", ping, output_model=PingOutput)
    a.on_agent_ready(lambda ctx: ctx.context_bus.register(ctx.manifest.name))


app = define_app(setup)
