"""One MCP tool, `lookup`: fetches an item of an HTTP API, `GET {base_url}/items/{id}`.
Settings: `base_url`, the API's base URL; its host must be in the server's `allowed_hosts`."""

import re

from gateway_plugin import ProviderError
from gateway_plugin.http import Request
from gateway_plugin.tool import ToolContext, ToolFailure, Tools, structured, tool, tool_world

# Also keeps the id from changing the URL's path or query.
ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
LOOKUP = {
    "type": "object",
    "required": ["id"],
    "properties": {"id": {"type": "string", "description": "The item's id"}},
}


class Items(Tools):
    NAME = "{{name}}"
    VERSION = "0.1.0"

    @tool(
        description="Looks up an item by its id",
        input_schema=LOOKUP,
        annotations={"readOnlyHint": True},
    )
    def lookup(self, args: dict, context: ToolContext):
        base_url = context.settings(base_url="")["base_url"].strip().rstrip("/")
        if not base_url:
            # The operator's to fix: a gateway error, not something the model can correct.
            raise ProviderError.failed(f"MCP server `{context.server}` has no base_url setting")
        item_id = args["id"]
        if not isinstance(item_id, str) or not ID.fullmatch(item_id):
            # A ToolFailure is a result the model reads, so it can try another id.
            raise ToolFailure("id is 1 to 64 letters, digits, - or _")
        response = Request.get(f"{base_url}/items/{item_id}").send()
        if response.status == 404:
            raise ToolFailure(f"no item {item_id}")
        if not response.is_success():
            # Not the model's to correct: a failed call, naming the status.
            raise ProviderError.failed(f"the items API answered HTTP {response.status}")
        return structured(response.json())


WitWorld = tool_world(Items)
