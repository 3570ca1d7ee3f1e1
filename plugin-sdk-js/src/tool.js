// A tool plugin (the `tool` world of wit/tool.wit): MCP tools declared as plain objects, their
// handlers given parsed arguments and returning what the model reads.

import { callPlugin, crash } from './crash.js';
import { ProviderError } from './errors.js';
import { secret, settingsObject } from './values.js';

/**
 * The tool ran and failed in a way the model should read and correct (a wrong argument, a city not
 * found): thrown from a handler, it becomes an is-error result whose text is the message.
 */
export class ToolFailure extends Error {
  constructor(message) {
    super(message);
    this.name = 'ToolFailure';
  }
}

/** A call that could not be made, as the WIT's `tool-error` says it. */
class ToolError extends Error {
  /** @param {'unknown-tool' | 'invalid-arguments' | 'failed'} kind */
  constructor(kind, message) {
    super(message);
    this.name = 'ToolError';
    this.kind = kind;
  }
}

/** The arguments do not fit the tool: the caller gets JSON-RPC -32602 with the message. */
export class InvalidArguments extends ToolError {
  constructor(message) {
    super('invalid-arguments', message);
    this.name = 'InvalidArguments';
  }
}

/**
 * A tool's result, built with chained calls: `ToolResult.text('...')`,
 * `new ToolResult().image(png, 'image/png').text('A chart')`, `ToolResult.error('not found')`.
 */
export class ToolResult {
  constructor() {
    this.content = [];
    /** @type {string | undefined} */
    this.structuredContent = undefined;
    this.isError = false;
  }

  static text(text) {
    return new ToolResult().text(text);
  }

  static structured(value) {
    return new ToolResult().structured(value);
  }

  static error(message) {
    return new ToolResult().error(message);
  }

  text(text) {
    this.content.push({ tag: 'text', val: text });
    return this;
  }

  /** An image: its bytes (the gateway base64-encodes them) and media type (`image/png`). */
  image(data, mediaType) {
    this.content.push({ tag: 'image', val: { data, mediaType } });
    return this;
  }

  audio(data, mediaType) {
    this.content.push({ tag: 'audio', val: { data, mediaType } });
    return this;
  }

  /** A link to a resource the caller may fetch. */
  resourceLink(uri, name, { title, description, mediaType } = {}) {
    this.content.push({ tag: 'resource-link', val: { uri, name, title, description, mediaType } });
    return this;
  }

  /** A resource sent whole: `body` a string (text) or bytes (a blob). */
  resource(uri, body, mediaType) {
    const val = typeof body === 'string' ? { tag: 'text', val: body } : { tag: 'blob', val: body };
    this.content.push({ tag: 'embedded', val: { uri, mediaType, body: val } });
    return this;
  }

  /**
   * `value` as the structured content, which should match the tool's `outputSchema`. Without other
   * content the result also gets its JSON as text: MCP asks for both, for clients that read only
   * text.
   */
  structured(value) {
    this.structuredContent = JSON.stringify(value);
    return this;
  }

  /** Marks the result a failure the model reads, with `message` as text if given. */
  error(message) {
    this.isError = true;
    return message === undefined ? this : this.text(message);
  }

  /** The result as the WIT's `tool-result`. */
  toWit() {
    const { structuredContent, isError } = this;
    const alone = this.content.length === 0 && structuredContent !== undefined;
    const content = alone ? [{ tag: 'text', val: structuredContent }] : this.content;
    return { content, structuredContent, isError };
  }
}

/** Where a call runs: the MCP server (`[mcp_servers.ID]`), its settings and secrets. */
export class ToolContext {
  #context;

  /** @param {{server: string, settings: string, secrets: [string, string][]}} context */
  constructor(context) {
    this.server = context.server;
    this.#context = context;
  }

  /**
   * The server's settings (`[mcp_servers.ID.settings]`) over `defaults`, checked as
   * `routeSettings` checks a route's: a setting `defaults` does not name, or of another type, is
   * refused (`failed`).
   */
  settings(defaults) {
    return settingsObject(this.#context.settings, `MCP server \`${this.server}\``, defaults);
  }

  /** What the settings name as `NAME_env` (or `NAME_file_env`, as `NAME_file`), if set. */
  secret(name) {
    return secret(this.#context, name);
  }
}

const NAME = /^[A-Za-z0-9_.-]{1,128}$/;
const isObject = (value) => typeof value === 'object' && value !== null && !Array.isArray(value);
const json = (value) => (value === undefined ? undefined : JSON.stringify(value));

/** A declared tool as the WIT's `tool-def`; a malformed one is the plugin's bug. */
function definition(tool) {
  if (typeof tool.name !== 'string' || !NAME.test(tool.name)) {
    throw new TypeError(`tool name ${JSON.stringify(tool.name)}: use 1 to 128 ASCII letters, digits, _ - .`);
  }
  if (typeof tool.handler !== 'function') {
    throw new TypeError(`tool \`${tool.name}\` has no handler`);
  }
  return {
    name: tool.name,
    title: tool.title,
    description: tool.description,
    inputSchema: JSON.stringify(tool.inputSchema ?? { type: 'object' }),
    outputSchema: json(tool.outputSchema),
    annotations: json(tool.annotations),
  };
}

/** The arguments' JSON text as an object with every property the input schema requires. */
function parseArguments(tool, text) {
  let args;
  try {
    args = JSON.parse(text.trim() === '' ? '{}' : text);
  } catch (error) {
    throw new InvalidArguments(`the arguments are not JSON: ${error.message}`);
  }
  if (!isObject(args)) {
    throw new InvalidArguments('the arguments must be a JSON object');
  }
  const missing = (tool.inputSchema?.required ?? []).filter((name) => !Object.hasOwn(args, name));
  if (missing.length > 0) {
    const names = missing.map((name) => `\`${name}\``).join(', ');
    throw new InvalidArguments(`missing required argument${missing.length > 1 ? 's' : ''}: ${names}`);
  }
  return args;
}

/** What a handler returned as the WIT's `tool-result`; anything unexpected is the plugin's bug. */
function toolResult(tool, value) {
  if (typeof value === 'string') {
    return ToolResult.text(value).toWit();
  }
  if (value instanceof ToolResult) {
    return value.toWit();
  }
  const promise = typeof value?.then === 'function';
  if (tool.outputSchema !== undefined && isObject(value) && !promise) {
    return ToolResult.structured(value).toWit();
  }
  const got = promise ? 'a promise (handlers are synchronous)' : value === null ? 'null' : `a ${typeof value}`;
  const expected = tool.outputSchema === undefined ? 'a string or a ToolResult' : 'a string, a ToolResult or an object';
  throw new TypeError(`tool \`${tool.name}\` returned ${got}: return ${expected}`);
}

/** The bindings return a thrown value's `payload` as the result's error: here a `tool-error`. */
const witError = (tag, val) => ({ payload: { tag, val } });

/**
 * The functions the component exports (the `tool` world's `info`, `list-tools`, `call-tool`) for
 * the plugin `name` (`version`) and its `tools`: an array of `{name, description, inputSchema,
 * handler(args, context)}` (optionally `title`, `outputSchema`, `annotations`; schemas as
 * objects), or a function of the `ToolContext` returning one. Export them from the plugin's module:
 *
 *     export const { info, listTools, callTool } = exportTools({ name, version, tools });
 *
 * A handler returns a string (one text block), a `ToolResult`, or, when the tool has an
 * `outputSchema`, an object (its structured content, and its JSON as text). Thrown `ToolFailure`s
 * are is-error results, `InvalidArguments` the WIT's `invalid-arguments`, `ProviderError`s (from the
 * HTTP helpers and `context.settings`) `failed`; any other exception is a bug: logged once and
 * ending the instance (`crash`), the caller gets a gateway error.
 */
export function exportTools({ name, version, tools }) {
  const declared = (context) => (typeof tools === 'function' ? callPlugin(() => tools(context)) : tools);
  const call = (run) => {
    try {
      return run();
    } catch (error) {
      if (error instanceof ToolFailure) {
        return ToolResult.error(error.message).toWit();
      }
      if (error instanceof ToolError) {
        throw witError(error.kind, error.message);
      }
      if (error instanceof ProviderError) {
        throw witError('failed', error.status ? `HTTP ${error.status}: ${error.message}` : error.message);
      }
      return crash(error);
    }
  };
  return {
    info: () => ({ name, version, models: [] }),
    listTools: (context) => call(() => declared(new ToolContext(context)).map(definition)),
    callTool: (toolName, args, witContext) =>
      call(() => {
        const context = new ToolContext(witContext);
        const tool = declared(context).find((candidate) => candidate.name === toolName);
        if (!tool) {
          throw new ToolError('unknown-tool', toolName);
        }
        const parsed = parseArguments(tool, args);
        return toolResult(tool, callPlugin(() => tool.handler(parsed, context)));
      }),
  };
}
