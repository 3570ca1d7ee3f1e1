"""Write gateway plugins in Python, on top of componentize-py's bindings of the gateway's WIT.

- `gateway_plugin.provider`: `HttpProvider` (build the upstream request, decode one answer or
  one stream event: a Server-Sent Event, an NDJSON line or an AWS event-stream `Message`, as
  its `FRAMING` says), the drivers, `Request`/`Response`, `Sink`, `provider_world`;
- `gateway_plugin.sse`, `gateway_plugin.ndjson`, `gateway_plugin.eventstream`: the framings'
  incremental parsers;
- `gateway_plugin.guard`: `Guard` (check requests and answers), `guard_world`;
- `gateway_plugin.tool`: `Tools` and `@tool` (MCP tools), result helpers, `tool_world`;
- shared: `ProviderError` and the upstream error mapping (`errors`), `usage`, `openai_usage`,
  `finish_reason` (`common`), the gateway's `log` and `kv`, and `http` (`Request`, `Response`)
  for providers and tools;
- `gateway_plugin.testing`: a fake host, to run a plugin in unit tests without a gateway;
- `gateway-plugin build DIR` (`gateway_plugin.build`): the plugin in `DIR` as a component.

Import the world module your plugin is (`provider`, `guard` or `tool`): each imports only what
its WIT world provides, so a guard never imports `http`, nor a tool the provider's `sink`.
"""

import sys
from typing import TYPE_CHECKING, Any

__all__ = [
    "ProviderError",
    "embedded_error",
    "finish_reason",
    "openai_usage",
    "role_name",
    "upstream_error",
    "usage",
]

__version__ = "0.2.0"

if TYPE_CHECKING:
    from .common import finish_reason, openai_usage, role_name, usage
    from .errors import ProviderError, embedded_error, upstream_error

# Imported on first use, not here: `gateway-plugin build` imports this package natively, where
# the WIT bindings these modules import (`wit_world`) exist only once generated.
_LAZY = {
    "finish_reason": "common",
    "openai_usage": "common",
    "role_name": "common",
    "usage": "common",
    "ProviderError": "errors",
    "embedded_error": "errors",
    "upstream_error": "errors",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gateway_plugin' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


if sys.platform != "wasi":
    # Natively (a plugin's unit tests), `wit_world` is generated from the bundled WIT when
    # nothing else provides it; inside a component componentize-py provides it.
    from . import _bindings

    _bindings.install()
