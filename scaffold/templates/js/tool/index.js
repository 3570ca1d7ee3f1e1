// One MCP tool, `lookup`: fetches an item of an HTTP API, `GET {base_url}/items/{id}`.
// Settings: `base_url`, the API's base URL; its host must be in the server's `allowed_hosts`.
import { ProviderError, Request, ToolFailure, ToolResult, exportTools } from 'gateway-plugin-sdk';

// Also keeps the id from changing the URL's path or query.
const ID = /^[A-Za-z0-9_-]{1,64}$/;

export const { info, listTools, callTool } = exportTools({
  name: '{{name}}',
  version: '0.1.0',
  tools: [
    {
      name: 'lookup',
      description: 'Looks up an item by its id',
      inputSchema: {
        type: 'object',
        required: ['id'],
        properties: { id: { type: 'string', description: "The item's id" } },
      },
      annotations: { readOnlyHint: true },
      handler: ({ id }, context) => {
        const { base_url } = context.settings({ base_url: '' });
        if (base_url.trim() === '') {
          // The operator's to fix: a gateway error, not something the model can correct.
          throw ProviderError.failed(`MCP server \`${context.server}\` has no base_url setting`);
        }
        if (typeof id !== 'string' || !ID.test(id)) {
          // A ToolFailure is a result the model reads, so it can try another id.
          throw new ToolFailure('id is 1 to 64 letters, digits, - or _');
        }
        const response = Request.get(`${base_url.trim().replace(/\/+$/, '')}/items/${id}`).send();
        if (response.status === 404) {
          throw new ToolFailure(`no item ${id}`);
        }
        // Any other error status is a failed call (naming the status); an item is the result.
        return ToolResult.structured(response.errorForStatus().json());
      },
    },
  ],
});
