"""The official Python MCP client, unchanged, against the gateway's `/mcp`, in both protocol
eras. The runner starts the gateway in front of modern_server.py (`modern`) and
legacy_server.mjs (`legacy`), then passes `GATEWAY_MCP_SCENARIO`: JSON with `url` (the
gateway's /mcp), `key`, `scoped_key` and `scoped_tools` (the globs that key may use)."""

import fnmatch
import json
import os
from contextlib import asynccontextmanager

import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

SCENARIO_VAR = "GATEWAY_MCP_SCENARIO"
MODES = ("legacy", "2026-07-28")
# Generous for a loaded CI machine, but a hang still ends.
TIMEOUT_SECONDS = 60
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"

# Input properties (name -> JSON type) and required names, as the upstreams declare them.
SCHEMAS = {
    "modern__add": ({"a": "integer", "b": "integer"}, ["a", "b"]),
    "modern__echo": ({"text": "string"}, ["text"]),
    "legacy__search": ({"query": "string"}, ["query"]),
    "legacy__add": ({"a": "number", "b": "number"}, ["a", "b"]),
}

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="session")
def scenario():
    text = os.environ.get(SCENARIO_VAR)
    if not text:
        pytest.fail(
            f"{SCENARIO_VAR} is not set: this suite runs through the e2e runner, which starts "
            "the gateway and both upstreams (see tests/mcp/README.md)",
            pytrace=False,
        )
    return json.loads(text)


@asynccontextmanager
async def connect(scenario, mode, key=None, headers=(), on_response=None):
    """A connected client. The SDK takes no headers itself: they ride on the httpx2 client
    handed to its Streamable HTTP transport. trust_env=False so no proxy from the
    environment sits between the suite and 127.0.0.1."""
    hooks = {"response": [on_response]} if on_response else {}
    http = httpx2.AsyncClient(
        headers={"authorization": f"Bearer {key or scenario['key']}", **dict(headers)},
        timeout=httpx2.Timeout(TIMEOUT_SECONDS),
        trust_env=False,
        event_hooks=hooks,
    )
    async with http:
        transport = streamable_http_client(scenario["url"], http_client=http)
        async with Client(transport, mode=mode, read_timeout_seconds=TIMEOUT_SECONDS) as client:
            yield client


def texts(result):
    return [block.text for block in result.content if block.type == "text"]


def shape(schema):
    assert schema.get("type") == "object", schema
    properties = {name: prop.get("type") for name, prop in schema.get("properties", {}).items()}
    return properties, sorted(schema.get("required", []))


def allowed(name, globs):
    return any(fnmatch.fnmatchcase(name, glob) for glob in globs)


async def listed(client):
    return {tool.name: tool for tool in (await client.list_tools()).tools}


@pytest.mark.parametrize("mode", MODES)
async def test_lists_both_upstreams_tools(scenario, mode):
    async with connect(scenario, mode) as client:
        if mode == "legacy":
            assert client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS, client.protocol_version
        tools = await listed(client)
    for name, expected in SCHEMAS.items():
        assert name in tools, sorted(tools)
        assert shape(tools[name].input_schema) == expected, tools[name].input_schema
    # The client checks structured results against this, so the gateway must relay it.
    output = tools["modern__add"].output_schema
    assert output is not None and output["properties"]["result"]["type"] == "integer", output


@pytest.mark.parametrize("mode", MODES)
async def test_modern_add_structured(scenario, mode):
    async with connect(scenario, mode) as client:
        result = await client.call_tool("modern__add", {"a": 2, "b": 3})
    assert not result.is_error, result
    assert result.structured_content == {"result": 5}
    assert texts(result) == ["5"]


@pytest.mark.parametrize("mode", MODES)
async def test_legacy_tools(scenario, mode):
    async with connect(scenario, mode) as client:
        search = await client.call_tool("legacy__search", {"query": "cats"})
        added = await client.call_tool("legacy__add", {"a": 2, "b": 3})
    assert not search.is_error and texts(search) == ["results for cats"], search
    assert not added.is_error and texts(added) == ["5"], added


@pytest.mark.parametrize("mode", MODES)
async def test_progress_reaches_the_caller(scenario, mode):
    # The client sends a progressToken with a callback; the gateway answers on an event
    # stream that carries the upstream's notifications/progress (a session-era server, in
    # either era of the caller), then the result.
    seen = []
    content_types = []

    async def progress(done, total, message):
        seen.append((done, total, message))

    async def record(response):
        if response.request.method == "POST":
            content_types.append(response.headers.get("content-type", ""))

    async with connect(scenario, mode, on_response=record) as client:
        result = await client.call_tool("legacy__count", {"n": 3}, progress_callback=progress)
        plain = await client.call_tool("legacy__count", {"n": 2})
    assert texts(result) == ["counted to 3"] and texts(plain) == ["counted to 2"], (result, plain)
    assert seen == [(1, 3, "counted 1"), (2, 3, "counted 2"), (3, 3, "counted 3")], seen
    # Streamed only where progress was asked for (the client's other requests are JSON).
    streamed = [t for t in content_types if t.startswith("text/event-stream")]
    assert len(streamed) == 1, content_types


@pytest.mark.parametrize("mode", MODES)
async def test_tool_failure_is_a_result(scenario, mode):
    async with connect(scenario, mode) as client:
        result = await client.call_tool("modern__fail", {})
    assert result.is_error
    assert texts(result) == ["it failed on purpose"]


@pytest.mark.parametrize("mode", MODES)
async def test_unknown_tool_is_a_protocol_error(scenario, mode):
    # The spec (2025-06-18 on, and 2026-07-28) makes an unknown tool a JSON-RPC error, -32602,
    # even though both SDKs' servers answer it with an isError result of their own.
    async with connect(scenario, mode) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("modern__nope", {})
    assert raised.value.error.code == INVALID_PARAMS, raised.value.error


@pytest.mark.parametrize("mode", MODES)
async def test_scoped_key_lists_only_its_tools(scenario, mode):
    globs = scenario["scoped_tools"]
    async with connect(scenario, mode, key=scenario["scoped_key"]) as client:
        tools = await listed(client)
    assert tools, "the scoped key lists nothing"
    stray = [name for name in tools if not allowed(name, globs)]
    assert not stray, (stray, globs)
    expected = {name for name in SCHEMAS if allowed(name, globs)}
    assert expected <= tools.keys(), (sorted(tools), globs)


@pytest.mark.parametrize("mode", MODES)
async def test_scoped_key_refused_other_tools(scenario, mode):
    globs = scenario["scoped_tools"]
    assert allowed("modern__add", globs) and not allowed("modern__echo", globs), globs
    async with connect(scenario, mode, key=scenario["scoped_key"]) as client:
        permitted = await client.call_tool("modern__add", {"a": 1, "b": 1})
        with pytest.raises(MCPError) as raised:
            await client.call_tool("modern__echo", {"text": "hi"})
    assert texts(permitted) == ["2"], permitted
    said = raised.value.error.model_dump_json()
    for secret in (scenario["scoped_key"], scenario["key"]):
        assert secret not in said, said


@pytest.mark.parametrize("mode", MODES)
async def test_bad_key_is_refused(scenario, mode):
    statuses = []

    async def record(response):
        statuses.append(response.status_code)

    # Legacy mode fails at initialize, 2026-07-28 (which sends nothing until the first
    # request) at list_tools; either way the SDK's task groups wrap the error on its way out.
    with pytest.RaisesGroup(MCPError, allow_unwrapped=True, flatten_subgroups=True):
        async with connect(scenario, mode, key="not-a-key", on_response=record) as client:
            await client.list_tools()
    assert statuses and set(statuses) == {401}, statuses


@pytest.mark.parametrize("mode", MODES)
async def test_upstream_sees_trace_but_not_the_callers_key(scenario, mode):
    traceparent = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
    async with connect(scenario, mode, headers={"traceparent": traceparent}) as client:
        result = await client.call_tool("modern__headers", {})
    seen = result.structured_content
    assert not result.is_error and isinstance(seen, dict), result
    assert TRACE_ID in seen.get("traceparent", ""), seen
    assert scenario["key"] not in json.dumps(seen), seen


async def test_auto_discovers_the_modern_era(scenario):
    async with connect(scenario, "auto") as client:
        assert client.protocol_version == "2026-07-28"
        assert "modern__add" in await listed(client)
        result = await client.call_tool("modern__add", {"a": 20, "b": 22})
    assert result.structured_content == {"result": 42}
