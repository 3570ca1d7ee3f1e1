"""Write gateway plugins in Python, on top of componentize-py's bindings of `wit/`.

- `gateway_plugin.provider`: `HttpProvider` (build the upstream request, decode one answer or
  one Server-Sent Event), the drivers, `Request`/`Response`, `Sink`, `provider_world`;
- `gateway_plugin.guard`: `Guard` (check requests and answers), `guard_world`;
- `gateway_plugin.tool`: `Tools` and `@tool` (MCP tools), result helpers, `tool_world`;
- shared: `ProviderError` and the upstream error mapping (`errors`), `usage`, `openai_usage`,
  `finish_reason` (`common`), the gateway's `log` and `kv`, and `http` (`Request`, `Response`)
  for providers and tools.

Import the world module your plugin is (`provider`, `guard` or `tool`): each imports only what
its WIT world provides, so a guard never imports `http`, nor a tool the provider's `sink`.
"""

from .common import finish_reason, openai_usage, role_name, usage
from .errors import ProviderError, embedded_error, upstream_error

__all__ = [
    "ProviderError",
    "embedded_error",
    "finish_reason",
    "openai_usage",
    "role_name",
    "upstream_error",
    "usage",
]

__version__ = "0.1.0"
