declare module 'gateway:provider/tool-types@0.2.0' {
  /**
   * A tool, as `tools/list` shows it. The gateway names it `SERVER__NAME` to callers.
   */
  export interface ToolDef {
    /**
     * Its name within the plugin: ASCII letters, digits, `_`, `-` and `.`, at most 128.
     */
    name: string,
    /**
     * A human-readable name for user interfaces.
     */
    title?: string,
    /**
     * What it does, for the model that decides to call it.
     */
    description?: string,
    /**
     * The JSON Schema of its `arguments`, as JSON text: an object schema
     * (`{"type":"object","properties":{...}}`).
     */
    inputSchema: string,
    /**
     * The JSON Schema of its `structured-content`, as JSON text, if it gives one.
     */
    outputSchema?: string,
    /**
     * MCP's tool annotations (`readOnlyHint`, `destructiveHint`, `idempotentHint`,
     * `openWorldHint`, `title`), as a JSON object's text.
     */
    annotations?: string,
  }
  /**
   * Where a call runs. The server's own, as a route's are a provider's.
   */
  export interface ToolContext {
    /**
     * The server's id: `[mcp_servers.ID]`.
     */
    server: string,
    /**
     * `[mcp_servers.ID.settings]`, as a JSON object.
     */
    settings: string,
    /**
     * What the settings name in the host's environment, as for a route: for
     * `NAME_env = "VAR"`, (`NAME`, the value of `VAR`); for `NAME_file_env = "VAR"`,
     * (`NAME_file`, the content of that file). The host redacts these values from
     * everything the server's calls answer, record and log.
     */
    secrets: Array<[string, string]>,
  }
  /**
   * An image or a sound, as bytes (the gateway base64-encodes them for MCP).
   */
  export interface Media {
    data: Uint8Array,
    /**
     * `image/png`, `audio/wav`, ...
     */
    mediaType: string,
  }
  /**
   * A link to a resource the caller may fetch: MCP's `resource_link`.
   */
  export interface ResourceLink {
    uri: string,
    name: string,
    title?: string,
    description?: string,
    mediaType?: string,
  }
  /**
   * What an embedded resource holds.
   */
  export type ResourceBody = ResourceBodyText | ResourceBodyBlob;
  export interface ResourceBodyText {
    tag: 'text',
    val: string,
  }
  export interface ResourceBodyBlob {
    tag: 'blob',
    val: Uint8Array,
  }
  /**
   * A resource sent whole: MCP's `resource` content (`embedded`: `resource` is a WIT
   * keyword).
   */
  export interface EmbeddedResource {
    uri: string,
    mediaType?: string,
    body: ResourceBody,
  }
  /**
   * One block of a tool's result.
   */
  export type Content = ContentText | ContentImage | ContentAudio | ContentResourceLink | ContentEmbedded;
  export interface ContentText {
    tag: 'text',
    val: string,
  }
  export interface ContentImage {
    tag: 'image',
    val: Media,
  }
  export interface ContentAudio {
    tag: 'audio',
    val: Media,
  }
  export interface ContentResourceLink {
    tag: 'resource-link',
    val: ResourceLink,
  }
  export interface ContentEmbedded {
    tag: 'embedded',
    val: EmbeddedResource,
  }
  export interface ToolResult {
    /**
     * What the model reads.
     */
    content: Array<Content>,
    /**
     * A JSON value (text) that matches the tool's `output-schema`, for programs.
     */
    structuredContent?: string,
    /**
     * The tool ran and failed: `content` says how, for the model to read and
     * correct itself (a wrong argument, a city not found). Recorded as an error.
     */
    isError: boolean,
  }
  /**
   * A call that could not be made at all. A failure the model should read is a
   * `tool-result` with `is-error` instead.
   */
  export type ToolError = ToolErrorUnknownTool | ToolErrorInvalidArguments | ToolErrorFailed;
  /**
   * No tool of this name (JSON-RPC -32602 to the caller).
   */
  export interface ToolErrorUnknownTool {
    tag: 'unknown-tool',
    val: string,
  }
  /**
   * The arguments do not fit the tool's schema (JSON-RPC -32602).
   */
  export interface ToolErrorInvalidArguments {
    tag: 'invalid-arguments',
    val: string,
  }
  /**
   * Anything else: the plugin's settings, an upstream down (a gateway error).
   */
  export interface ToolErrorFailed {
    tag: 'failed',
    val: string,
  }
}
