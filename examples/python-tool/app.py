"""A calculator in Python, as MCP tools: `add`, `multiply` and `divide` two numbers, and the
`mean` of a list with structured output. Dividing by zero is an is-error result, which the
model reads and can correct; arguments that are not numbers are refused (-32602).

Served with `[mcp_servers.calc] plugin = "python-tool"`: callers see `calc__add`, ...
"""

from typing import Any, List

from gateway_plugin.tool import InvalidArguments, ToolContext, ToolFailure, Tools, tool, tool_world

NUMBER = {"type": "number"}
TWO = {"type": "object", "properties": {"a": NUMBER, "b": NUMBER}, "required": ["a", "b"]}
LIST = {"type": "array", "items": NUMBER, "minItems": 1}
VALUES = {"type": "object", "properties": {"values": LIST}, "required": ["values"]}
MEAN = {"type": "object", "properties": {"mean": NUMBER, "count": {"type": "integer"}}}
PURE = {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}


def numbers(values: Any, what: str) -> List[float]:
    if not values or not isinstance(values, list) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in values
    ):
        raise InvalidArguments(f"{what} must be numbers")
    return values


class Calculator(Tools):
    NAME = "python-tool"
    VERSION = "0.1.0"

    @tool(input_schema=TWO, annotations=PURE)
    def add(self, args: dict, context: ToolContext) -> str:
        """Adds two numbers: a + b."""
        a, b = numbers([args["a"], args["b"]], "a and b")
        return str(a + b)

    @tool(input_schema=TWO, annotations=PURE)
    def multiply(self, args: dict, context: ToolContext) -> str:
        """Multiplies two numbers: a * b."""
        a, b = numbers([args["a"], args["b"]], "a and b")
        return str(a * b)

    @tool(input_schema=TWO, annotations=PURE)
    def divide(self, args: dict, context: ToolContext) -> str:
        """Divides a by b."""
        a, b = numbers([args["a"], args["b"]], "a and b")
        if b == 0:
            raise ToolFailure("cannot divide by zero: b must not be 0")
        return str(a / b)

    @tool(input_schema=VALUES, output_schema=MEAN, title="Mean", annotations=PURE)
    def mean(self, args: dict, context: ToolContext) -> dict:
        """The arithmetic mean of a non-empty list of numbers."""
        values = numbers(args["values"], "values")
        return {"mean": sum(values) / len(values), "count": len(values)}


WitWorld = tool_world(Calculator)
