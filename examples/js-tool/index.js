// MCP tools on text in JavaScript (pure computations: no settings, no HTTP), which the gateway
// serves at `POST /mcp` as `ID__word_count`, `ID__slugify`, `ID__reverse` for `[mcp_servers.ID]
// plugin = "js-tool"`. Build: `cargo xtask plugin js examples/js-tool` (writes js-tool.wasm; the
// package.json's `"gateway": {"world": "tool"}` makes it a tool plugin).
import { ToolFailure, exportTools } from 'gateway-plugin-sdk';

const textInput = (what) => ({
  type: 'object',
  properties: { text: { type: 'string', description: what } },
  required: ['text'],
});
const count = { type: 'integer', minimum: 0 };
const pure = { readOnlyHint: true, idempotentHint: true, openWorldHint: false };

export const { info, listTools, callTool } = exportTools({
  name: 'js-tool',
  version: '0.1.0',
  tools: [
    {
      name: 'word_count',
      description: 'Counts the words, characters and lines of a text.',
      inputSchema: textInput('The text to count'),
      outputSchema: {
        type: 'object',
        properties: { words: count, characters: count, lines: count },
        required: ['words', 'characters', 'lines'],
      },
      annotations: pure,
      handler: ({ text }) => ({
        words: text.split(/\s+/).filter(Boolean).length,
        characters: [...text].length,
        lines: text === '' ? 0 : text.split(/\r?\n/).length,
      }),
    },
    {
      name: 'slugify',
      title: 'Slugify',
      description: 'Turns a title into a URL slug: its ASCII letters and digits, lowercase, by words.',
      inputSchema: textInput('The title'),
      annotations: pure,
      handler: ({ text }) => {
        // No `normalize` to fold accents: the plugin's engine has no Intl.
        const slug = text.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '');
        if (slug === '') {
          // The model reads this and can try another text.
          throw new ToolFailure(`"${text}" has no ASCII letters or digits to make a slug of`);
        }
        return slug;
      },
    },
    {
      name: 'reverse',
      description: 'Reverses a text, character by character (Unicode code points).',
      inputSchema: textInput('The text to reverse'),
      annotations: pure,
      handler: ({ text }) => [...text].reverse().join(''),
    },
  ],
});
