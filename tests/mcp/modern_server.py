"""Upstream MCP server of the stateless era, built on the official Python SDK.

Run as `python modern_server.py PORT` (0 picks a free port). The SDK serves both
the 2026-07-28 revision and the handshake era on the one `/mcp` endpoint, so the
gateway may reach it either way.

This SDK answers a call of an unknown tool with a result, not the spec's -32602 error:
{"content":[{"type":"text","text":"Unknown tool: NAME"}],"isError":true,...}; at 2026-07-28
it also rejects a request whose Mcp-Method header is missing or differs from the body's
method (HTTP 400, -32020) or whose params._meta lacks io.modelcontextprotocol/clientCapabilities
(HTTP 400, -32602).
"""

import asyncio
import socket
import sys

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, TextContent

server = MCPServer("modern")


@server.tool()
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Says the text back."""
    return text


@server.tool()
def big(n: int) -> str:
    """A text of n x characters."""
    # For the gateway's limits on relayed result size.
    return "x" * n


@server.tool()
async def sleep(seconds: float) -> str:
    """Answers after the given seconds."""
    # For the gateway's timeouts and cancellation.
    await asyncio.sleep(seconds)
    return "slept"


@server.tool()
def fail() -> CallToolResult:
    """Always fails."""
    # Returned rather than raised: a raised ToolError gets the SDK's
    # "Error executing tool fail: " prefix, and the tests want the text exact.
    return CallToolResult(content=[TextContent(type="text", text="it failed on purpose")], is_error=True)


def extra() -> str:
    """Appears once grow was called."""
    return "extra called"


@server.tool()
async def grow(ctx: Context) -> str:
    """Registers the tool extra and tells subscriptions/listen streams."""
    # For the gateway's listening: it learns of the change only from the stream it opened.
    if "extra" not in {tool.name for tool in await server.list_tools()}:
        server.add_tool(extra)
        await ctx.notify_tools_changed()
    return "grown"


@server.tool()
def headers(ctx: Context) -> dict[str, str]:
    """The HTTP request headers this call arrived with."""
    # Lets the gateway's tests see what it forwards upstream (its configured
    # authorization, traceparent); Starlette already lower-cases the names.
    return {k.lower(): v for k, v in (ctx.headers or {}).items()}


async def main(port: int) -> None:
    # Bind first so PORT 0 can be reported; print only once uvicorn has run the
    # app's lifespan (the SDK's session manager), when requests are served.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    port = sock.getsockname()[1]
    # Stateless with JSON bodies: the 2026-07-28 path is per request anyway, and the
    # handshake era still works (each request gets a throwaway session), so the
    # gateway's SSE handling is left to the legacy server, which streams.
    app = server.streamable_http_app(json_response=True, stateless_http=True)
    uv = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    serving = asyncio.create_task(uv.serve(sockets=[sock]))
    while not uv.started:
        if serving.done():
            await serving
            sys.exit("uvicorn stopped before it started")
        await asyncio.sleep(0.02)
    print(f"listening http://127.0.0.1:{port}/mcp", flush=True)
    await serving


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
