"""Tool plugins (the `tool` world of `wit/tool.wit`): the tools of an MCP server
(`[mcp_servers.ID] plugin = "NAME"`), which the gateway shows its callers as `ID__TOOL`.

Subclass `Tools`, set `NAME` and `VERSION`, and mark each tool's handler with `@tool(...)`
(its name, description, JSON Schemas as dicts, title, annotations). A handler gets the call's
arguments, a dict already checked to be a JSON object holding the input schema's `required`
properties, and a `ToolContext` (the server's id, settings and secrets). What it returns is the
result:

- a string: one text block;
- a dict, when the tool declares an `output_schema`: the structured content, and its JSON as
  one text block too (as MCP asks);
- one content block (`text`, `image`, `audio`, `resource_link`, `resource`), a list of them,
  or a whole result (`result`, `structured`, `error_result`) for anything else.

Raise `ToolFailure(message)` when the tool ran and failed in a way the model should read and
correct (a wrong value, a city not found): an is-error result. `InvalidArguments(message)`
refuses the call (JSON-RPC -32602), as a missing required argument is. A `ProviderError` (a
setting refused by `context.settings`, an upstream down from `gateway_plugin.http`) fails the
call with a gateway error. Any other exception is a bug: logged once and ending the instance
(`crash`), the caller told nothing of it. End the module with `WitWorld = tool_world(MyTools)`.

Each listing and each call has a fresh instance: keep what must outlive a call in `kv`.
"""

import inspect
import json
import re
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar
from collections.abc import Callable, Sequence

from componentize_py_types import Err
from wit_world.imports import tool_types, types

from . import crash
from .common import settings_object
from .errors import ProviderError

T = TypeVar("T")

__all__ = [
    "Content",
    "InvalidArguments",
    "ToolContext",
    "ToolFailure",
    "ToolResult",
    "ToolSpec",
    "Tools",
    "audio",
    "error_result",
    "image",
    "resource",
    "resource_link",
    "result",
    "structured",
    "text",
    "tool",
    "ToolWorld",
    "tool_world",
]

Content = tool_types.Content
ToolResult = tool_types.ToolResult
_CONTENT = (
    tool_types.Content_Text,
    tool_types.Content_Image,
    tool_types.Content_Audio,
    tool_types.Content_ResourceLink,
    tool_types.Content_Embedded,
)
Handler = Callable[[Any, dict[str, Any], "ToolContext"], Any]

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,128}")


class ToolFailure(Exception):
    """The tool ran and failed: an is-error result whose text is `message`, for the model."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArguments(Exception):
    """The arguments do not fit the tool: the call is refused (JSON-RPC -32602)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# ---------------------------------------------------------------------------------- results


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def text(value: str) -> Content:
    return tool_types.Content_Text(value)


def image(data: bytes, media_type: str) -> Content:
    """An image (`image/png`, ...): the gateway base64-encodes it for MCP."""
    return tool_types.Content_Image(tool_types.Media(bytes(data), media_type))


def audio(data: bytes, media_type: str) -> Content:
    """A sound (`audio/wav`, ...): the gateway base64-encodes it for MCP."""
    return tool_types.Content_Audio(tool_types.Media(bytes(data), media_type))


def resource_link(
    uri: str,
    name: str,
    *,
    title: str | None = None,
    description: str | None = None,
    media_type: str | None = None,
) -> Content:
    """A link to a resource the caller may fetch."""
    link = tool_types.ResourceLink(uri, name, title, description, media_type)
    return tool_types.Content_ResourceLink(link)


def resource(uri: str, body: str | bytes, media_type: str | None = None) -> Content:
    """A resource sent whole: text when `body` is a string, else a blob."""
    if isinstance(body, str):
        held: tool_types.ResourceBody = tool_types.ResourceBody_Text(body)
    else:
        held = tool_types.ResourceBody_Blob(bytes(body))
    return tool_types.Content_Embedded(tool_types.EmbeddedResource(uri, media_type, held))


def _blocks(content: Sequence[str | Content]) -> list[Content]:
    blocks = [text(block) if isinstance(block, str) else block for block in content]
    for block in blocks:
        # Caught here, the mistake is named; the bindings would only fail to lower it.
        if not isinstance(block, _CONTENT):
            raise TypeError(f"a result holds a {type(block).__name__}, not content")
    return blocks


def result(
    *content: str | Content, structured: Any = None, is_error: bool = False
) -> ToolResult:
    """A result of these blocks (a string is a text block), with `structured` content (a
    JSON-able value matching the tool's output schema) when given."""
    data = None if structured is None else _json(structured)
    return tool_types.ToolResult(_blocks(content), data, is_error)


def structured(value: dict[str, Any], *content: str | Content) -> ToolResult:
    """`value` as structured content, with `content` for the model (default: its JSON)."""
    return result(*(content or [_json(value)]), structured=value)


def error_result(message: str, *content: str | Content) -> ToolResult:
    """The tool failed, as `raise ToolFailure(message)` says it: the model reads why."""
    return result(message, *content, is_error=True)


# ---------------------------------------------------------------------------------- tools


@dataclass(frozen=True)
class ToolSpec:
    """A tool as `@tool` declares it; `handler` is the undecorated method."""

    name: str
    description: str | None
    input_schema: dict[str, Any]
    handler: Handler
    title: str | None = None
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None

    def to_wit(self) -> tool_types.ToolDef:
        def optional(value: dict[str, Any] | None) -> str | None:
            return None if value is None else _json(value)

        return tool_types.ToolDef(
            self.name,
            self.title,
            self.description,
            _json(self.input_schema),
            optional(self.output_schema),
            optional(self.annotations),
        )


def _object_schema(schema: dict[str, Any], what: str, tool_name: str) -> dict[str, Any]:
    # Checked when the module is imported, which a build does: a bad declaration fails it.
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ValueError(f"tool `{tool_name}`: {what} must be a JSON Schema of type object")
    return schema


def tool(
    name: str | None = None,
    *,
    description: str | None = None,
    input_schema: dict[str, Any] | None = None,
    title: str | None = None,
    output_schema: dict[str, Any] | None = None,
    annotations: dict[str, Any] | None = None,
) -> Callable[[Handler], Handler]:
    """Declares a method of a `Tools` class a tool: `name` defaults to the method's,
    `description` to its docstring, `input_schema` to no arguments."""

    def declare(handler: Handler) -> Handler:
        tool_name = name or handler.__name__
        if not _NAME.fullmatch(tool_name):
            raise ValueError(
                f"tool name `{tool_name}`: 1 to 128 ASCII letters, digits, `_`, `-` and `.`"
            )
        about = description
        if about is None and handler.__doc__:
            about = inspect.cleandoc(handler.__doc__)
        if output_schema is not None:
            _object_schema(output_schema, "output_schema", tool_name)
        schema = {"type": "object", "properties": {}} if input_schema is None else input_schema
        handler.__tool__ = ToolSpec(  # type: ignore[attr-defined]
            tool_name,
            about,
            _object_schema(schema, "input_schema", tool_name),
            handler,
            title,
            output_schema,
            annotations,
        )
        return handler

    return declare


class ToolContext:
    """Where a call runs (`context.raw` is the WIT record): the server's id, its settings and
    the secrets they name."""

    def __init__(self, raw: tool_types.ToolContext) -> None:
        self.raw = raw
        self.server: str = raw.server

    def settings(self, **defaults: Any) -> dict[str, Any]:
        """`[mcp_servers.ID.settings]` with `defaults` for the keys it leaves out; given
        defaults, other keys and values of another type than their default are refused (the
        call fails naming the server and the setting)."""
        return settings_object(self.raw.settings, f"server `{self.server}`", defaults)

    def secret(self, name: str) -> str | None:
        """What the settings name as `NAME_env` (or `NAME_file_env`, then `name` is
        `NAME_file`): the value the gateway read from its environment."""
        return next((value for key, value in self.raw.secrets if key == name), None)


class Tools:
    """A tool plugin. Set `NAME` and `VERSION`; declare tools with `@tool`."""

    NAME = "python-tool"
    VERSION = "0.1.0"

    def info(self) -> types.PluginInfo:
        return types.PluginInfo(self.NAME, self.VERSION, [])

    def list_tools(self, context: ToolContext) -> list[ToolSpec]:
        """The tools callers see: every `@tool` of the class, in order. Override it to offer
        some according to `context.settings()`; a tool not listed cannot be called."""
        found: dict[str, ToolSpec] = {}
        for klass in reversed(type(self).__mro__):
            for attribute, value in vars(klass).items():
                spec = getattr(value, "__tool__", None)
                if isinstance(spec, ToolSpec):
                    found[attribute] = spec  # an override replaces the base's tool
        specs = list(found.values())
        names = [spec.name for spec in specs]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"{type(self).__name__} declares tools {twice} twice")
        return specs


def _arguments(arguments: str, schema: dict[str, Any]) -> dict[str, Any]:
    try:
        value = json.loads(arguments or "{}")
    except ValueError as e:
        raise InvalidArguments(f"the arguments are not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise InvalidArguments("the arguments must be a JSON object")
    missing = [key for key in schema.get("required", ()) if key not in value]
    if missing:
        raise InvalidArguments(f"missing required argument(s): {', '.join(missing)}")
    return value


def _result(value: Any, spec: ToolSpec) -> ToolResult:
    if isinstance(value, tool_types.ToolResult):
        return value
    if isinstance(value, (str, *_CONTENT)):
        return result(value)
    if isinstance(value, list):
        return result(*value)
    if isinstance(value, dict) and spec.output_schema is not None:
        return structured(value)
    raise TypeError(
        f"tool `{spec.name}` returned {type(value).__name__}: return a string, content, a "
        "result, or a dict when it declares an output_schema"
    )


def _run(action: Callable[[], T]) -> T:
    """Runs an export: the SDK's errors become the WIT's; any other exception is a bug, logged
    once and ending the instance (`crash.end`)."""
    try:
        return action()
    except InvalidArguments as e:
        raise Err(tool_types.ToolError_InvalidArguments(e.message)) from None
    except ProviderError as e:
        raise Err(tool_types.ToolError_Failed(e.message)) from None
    except Err:
        raise
    except BaseException as e:  # noqa: BLE001 (every other exception ends the call)
        crash.end(e, "tool")


class ToolWorld(Protocol):
    """The `tool` world's exports, as the gateway calls them."""

    def info(self) -> types.PluginInfo: ...

    def list_tools(self, context: tool_types.ToolContext) -> list[tool_types.ToolDef]: ...

    def call_tool(
        self, name: str, arguments: str, context: tool_types.ToolContext
    ) -> ToolResult: ...


def tool_world(tools: Callable[[], Tools]) -> type[ToolWorld]:
    """The `WitWorld` class componentize-py exports for `tool` (a `Tools` subclass):

    WitWorld = tool_world(MyTools)
    """

    def call(name: str, arguments: str, raw: tool_types.ToolContext) -> ToolResult:
        instance = tools()
        context = ToolContext(raw)
        spec = next((s for s in instance.list_tools(context) if s.name == name), None)
        if spec is None:
            raise Err(tool_types.ToolError_UnknownTool(name))
        args = _arguments(arguments, spec.input_schema)
        try:
            value = spec.handler(instance, args, context)
        except ToolFailure as e:
            return error_result(e.message)
        return _result(value, spec)

    class WitWorld:
        def info(self) -> types.PluginInfo:
            return _run(lambda: tools().info())

        def list_tools(self, context: tool_types.ToolContext) -> list[tool_types.ToolDef]:
            return _run(
                lambda: [spec.to_wit() for spec in tools().list_tools(ToolContext(context))]
            )

        def call_tool(
            self, name: str, arguments: str, context: tool_types.ToolContext
        ) -> ToolResult:
            return _run(lambda: call(name, arguments, context))

    WitWorld.__qualname__ = WitWorld.__name__ = "WitWorld"
    return WitWorld
