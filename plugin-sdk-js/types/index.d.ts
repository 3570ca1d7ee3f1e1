// TypeScript types of the gateway's JavaScript plugin SDK (`gateway-plugin-sdk`). The values the
// gateway exchanges with a plugin are the WIT's (`wit/provider.wit`, `wit/tool.wit`) as the
// component bindings give them to JavaScript: records as objects with camelCase fields, variants
// as `{tag, val}`, enums as strings, `option<T>` as `T | undefined`, `list<u8>` as `Uint8Array`.

// ---- The values of the `provider` world (wit/provider.wit, interface `types`) ----

export type Role = 'system' | 'user' | 'assistant' | 'function' | 'tool';

export interface FunctionCall {
  name: string;
  /** JSON text, as the model wrote it. */
  arguments: string;
}

export interface ToolCall {
  id: string;
  name: string;
  arguments: string;
}

export type Source = { tag: 'bytes'; val: Uint8Array } | { tag: 'url'; val: string };

export interface Image {
  source: Source;
  mediaType?: string;
  /** `auto`, `low` or `high`. */
  detail?: string;
}

export interface Audio {
  data: Uint8Array;
  format: string;
}

export interface Document {
  source: Source;
  mediaType?: string;
  title?: string;
}

export interface Reasoning {
  text: string;
  signature?: string;
  redacted?: string;
}

export type Part =
  | { tag: 'text'; val: string }
  | { tag: 'image'; val: Image }
  | { tag: 'audio'; val: Audio }
  | { tag: 'document'; val: Document }
  | { tag: 'reasoning'; val: Reasoning };

export interface Message {
  role: Role;
  parts: Part[];
  name?: string;
  functionCall?: FunctionCall;
  toolCalls: ToolCall[];
  toolCallId?: string;
  isError: boolean;
}

export interface FunctionDef {
  name: string;
  description?: string;
  /** JSON Schema of the arguments, as JSON text. */
  parameters?: string;
}

export type FunctionChoice =
  | { tag: 'none' }
  | { tag: 'auto' }
  | { tag: 'required' }
  | { tag: 'named'; val: string };

export type Prompt = { tag: 'text'; val: string } | { tag: 'chat'; val: Message[] };

/** The gateway route serving the request, from the operator's config. */
export interface Route {
  /** The route id callers name. */
  id: string;
  /** Base URL of the upstream API, without a trailing slash; empty when the route has none. */
  baseUrl: string;
  /** The provider key: the caller's `Provider-API-Key`, else the route's configured key. */
  apiKey?: string;
  /** The route's plugin settings, as JSON text (see `routeSettings`). */
  settings: string;
  /** What the settings name in the host's environment (see `secret`). */
  secrets: [string, string][];
}

export type ReasoningEffort = 'none' | 'minimal' | 'low' | 'medium' | 'high' | 'xhigh';

export interface ReasoningConfig {
  effort?: ReasoningEffort;
  budgetTokens?: number;
}

/**
 * How much the answer may hold, as the gateway decided and reserved it: ask the upstream for no
 * more (`maxTokens` a choice, reasoning included; `choices` choices), whatever `params` say.
 */
export interface OutputLimit {
  /** Absent when the caller set none and no limit counts tokens or cost. */
  maxTokens?: number;
  choices: number;
}

export interface CompletionRequest {
  route: Route;
  model: string;
  prompt: Prompt;
  functions: FunctionDef[];
  functionChoice?: FunctionChoice;
  reasoning?: ReasoningConfig;
  /** The answer's size, which the plugin keeps to. */
  output: OutputLimit;
  /** Every other caller parameter (temperature, max_tokens, ...) as JSON text (see `paramsObject`). */
  params: string;
}

export type FinishReason =
  | { tag: 'stop' }
  | { tag: 'length' }
  | { tag: 'function-call' }
  | { tag: 'tool-calls' }
  | { tag: 'content-filter' }
  | { tag: 'stop-sequence'; val: string }
  | { tag: 'pause' }
  | { tag: 'refusal' }
  | { tag: 'other' };

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  cachedPromptTokens?: number;
  cacheCreationTokens?: number;
  reasoningTokens?: number;
  imagePromptTokens?: number;
  audioPromptTokens?: number;
}

export interface Choice {
  index: number;
  text: string;
  reasoning: Reasoning[];
  finishReason?: FinishReason;
  functionCall?: FunctionCall;
  toolCalls: ToolCall[];
  /** The provider's logprobs object as JSON text. */
  logprobs?: string;
}

export interface Completion {
  model: string;
  choices: Choice[];
  usage?: Usage;
}

export interface TextDelta {
  index: number;
  text: string;
}

export interface ReasoningDelta {
  index: number;
  block: number;
  text: string;
  signature?: string;
  redacted?: string;
}

export interface ToolCallDelta {
  index: number;
  call: number;
  id?: string;
  name?: string;
  arguments: string;
}

export interface Chunk {
  deltas: TextDelta[];
  reasoning: ReasoningDelta[];
  toolCalls: ToolCallDelta[];
  usage?: Usage;
}

export interface EmbeddingRequest {
  route: Route;
  model: string;
  input: string[];
  params: string;
}

export interface Embeddings {
  model: string;
  /** One vector per input, in input order. */
  vectors: (Float32Array | number[])[];
  usage?: Usage;
}

export interface ModelPrice {
  model: string;
  /** Dollars per million prompt tokens. */
  inputPerMtok: number;
  /** Dollars per million completion tokens. */
  outputPerMtok: number;
}

export interface PluginInfo {
  name: string;
  version: string;
  models: ModelPrice[];
}

export interface UpstreamError {
  status: number;
  message: string;
  retryAfter?: number;
}

export type WitProviderError =
  | { tag: 'invalid-request'; val: string }
  | { tag: 'upstream'; val: UpstreamError }
  | { tag: 'timeout'; val: string }
  | { tag: 'failed'; val: string };

// ---- Errors ----

export type ProviderErrorKind = 'invalid-request' | 'upstream' | 'timeout' | 'failed';

/**
 * Why a call failed; the gateway answers the caller: `invalid-request` 400, `upstream` 429 for a
 * 429 (with `Retry-After`), the status itself for 400, 404, 413 and 422, and 502 otherwise,
 * `failed` 502, `timeout` 504.
 */
export class ProviderError extends Error {
  constructor(kind: ProviderErrorKind, message: string, upstream?: { status: number; retryAfter?: number });
  readonly kind: ProviderErrorKind;
  /** With `upstream`: the upstream's status. */
  readonly status?: number;
  /** With `upstream`: the `Retry-After` seconds. */
  readonly retryAfter?: number;
  static invalidRequest(message: string): ProviderError;
  static upstream(status: number, message: string, retryAfter?: number): ProviderError;
  static timeout(message: string): ProviderError;
  static failed(message: string): ProviderError;
  /** An answer the plugin cannot read (`failed`); `error` should not quote the answer. */
  static malformed(error: unknown): ProviderError;
  toWit(): WitProviderError;
}

/** `ProviderError.upstream` from an error answer: the provider's message and `Retry-After`. */
export function upstreamError(status: number, body: string, retryAfter?: string): ProviderError;

/** `ProviderError.upstream` from an error object inside a successful answer (mid-stream). */
export function embeddedError(error: unknown): ProviderError;

// ---- HTTP ----

/** An outbound request through the gateway (only the route's `base_url` host is reachable). */
export class Request {
  constructor(method: string, url: string);
  static post(url: string): Request;
  static get(url: string): Request;
  readonly method: string;
  readonly url: string;
  headers: [string, string][];
  header(name: string, value: string): this;
  replaceHeader(name: string, value: string): this;
  bearer(key: string): this;
  /** The provider key, if any: in `header`, else as `Authorization: Bearer`. */
  apiKey(key: string | undefined, header?: string): this;
  /** `Accept: text/event-stream` when `stream`, else `application/json`. */
  streaming(stream: boolean): this;
  /** `value` as the JSON body, with its `Content-Type`. */
  json(value: unknown): this;
  body(body: string | Uint8Array): this;
  headerValue(name: string): string | undefined;
  /** Sends it; every status is a successful send (see `Response.errorForStatus`). */
  send(): Response;
}

export interface SseEvent {
  event?: string;
  data: string;
  id?: string;
}

export class Response {
  /** A response whose body is `chunks`: for testing a decoder under Node. */
  static fromChunks(status: number, headers: [string, string][], chunks: (string | Uint8Array)[]): Response;
  readonly status: number;
  readonly headers: [string, string][];
  readonly ok: boolean;
  header(name: string): string | undefined;
  isJson(): boolean;
  chunk(): Uint8Array | undefined;
  close(): void;
  bytes(): Uint8Array;
  text(): string;
  json(): any;
  /** This response when 2xx; otherwise throws `ProviderError.upstream`. */
  errorForStatus(): this;
  sse(): Generator<SseEvent>;
}

export class SseParser {
  push(bytes: Uint8Array): SseEvent[];
  finish(): SseEvent | undefined;
}

// ---- Reading answers ----

export class Answer {
  constructor(requestedModel: string);
  model(name: string | undefined): void;
  text(choice: number, text: string): void;
  toolCall(choice: number, call: number, piece: { id?: string; name?: string; arguments?: string }): void;
  functionCall(choice: number, piece: { name?: string; arguments?: string }): void;
  reasoning(choice: number, block: number, text: string, extra?: { signature?: string; redacted?: string }): void;
  finishReason(choice: number, reason: FinishReason): void;
  logprobs(choice: number, logprobs: unknown): void;
  usage(usage: Usage | undefined): void;
  /** The upstream said the answer is whole; later events are still read. */
  complete(): void;
  /** The end marker: no more events are read. */
  end(): void;
  isComplete(): boolean;
  isEnded(): boolean;
  takeUnsent(): Chunk | undefined;
  finish(): Completion;
}

export class Sink {
  constructor(send: (chunk: Chunk) => void);
  static buffered(): Sink;
  /** What a buffered sink received. */
  readonly sent: Chunk[];
  send(chunk: Partial<Chunk>): void;
  text(index: number, text: string): void;
}

export interface Decoder {
  body(body: string, answer: Answer): void;
  event(event: SseEvent, answer: Answer): void;
  end?(answer: Answer): void;
}

export function readCompletion(response: Response, requestedModel: string, decoder: Decoder): Completion;
export function readStream(response: Response, sink: Sink, requestedModel: string, decoder: Decoder): Completion;

// ---- Providers ----

export abstract class StreamDecoder implements Decoder {
  /** Reads a whole answer; call `answer.complete()` when it is complete. */
  abstract body(body: string, answer: Answer): void;
  /** Reads one stream event. Default: `[DONE]` ends, empty data is skipped, else `body`. */
  event(event: SseEvent, answer: Answer): void;
  end(answer: Answer): void;
}

/** Where an upstream body states the answer's length: paths of object keys from its top. */
export interface OutputFields {
  maxTokens: string[][];
  choices?: string[][];
}

/** Refuses (`failed`) a body that asks for more than the gateway's output limit. */
export function checkOutput(limit: OutputLimit, fields: OutputFields | undefined, body: Uint8Array): void;

/** A provider answering each completion with one upstream request; its class is its decoder. */
export abstract class HttpProvider extends StreamDecoder {
  /** Where its bodies state the answer's length; the drivers refuse one over `call.output`. */
  static OUTPUT?: OutputFields;
  abstract info(): PluginInfo;
  abstract request(call: CompletionRequest, stream: boolean): Request;
  /** A fresh decoder per call: by default `new this.constructor()`. */
  decoder(): Decoder;
  complete(call: CompletionRequest): Completion;
  completeStream(call: CompletionRequest, sink: Sink): Completion;
  embed(call: EmbeddingRequest): Embeddings;
}

export interface Provider {
  info(): PluginInfo;
  complete(call: CompletionRequest): Completion;
  completeStream(call: CompletionRequest, sink: Sink): Completion;
  embed(call: EmbeddingRequest): Embeddings;
}

/** The component's exports: `export const { info, complete, completeStream, embed } = exportProvider(p);` */
export function exportProvider(provider: Provider): {
  info(): PluginInfo;
  complete(request: CompletionRequest): Completion;
  completeStream(request: CompletionRequest): Completion;
  embed(request: EmbeddingRequest): Embeddings;
};

// ---- Tools (wit/tool.wit) ----

/** A JSON Schema, as an object. */
export type JsonSchema = Record<string, unknown>;

/** MCP's tool annotations. */
export interface ToolAnnotations {
  title?: string;
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
  [hint: string]: unknown;
}

/** Where a call runs: the MCP server `[mcp_servers.ID]`. */
export class ToolContext {
  /** The server's id. */
  readonly server: string;
  /** `[mcp_servers.ID.settings]` over `defaults`; with defaults, an unknown or mistyped setting is `failed`. */
  settings<T extends Record<string, unknown>>(defaults?: T): T;
  /** What the settings name as `NAME_env` (or `NAME_file_env`, as `NAME_file`), if set. */
  secret(name: string): string | undefined;
}

/** A tool: `name` is ASCII letters, digits, `_`, `-` and `.`, at most 128. */
export interface Tool<Args extends Record<string, any> = Record<string, any>> {
  name: string;
  title?: string;
  description?: string;
  /** An object schema; default `{type: 'object'}`. Its `required` properties are checked. */
  inputSchema?: JsonSchema;
  /** With it, the handler may return an object: the structured content. */
  outputSchema?: JsonSchema;
  annotations?: ToolAnnotations;
  /** Synchronous: the host's imports are. */
  handler(args: Args, context: ToolContext): string | ToolResult | Record<string, unknown>;
}

export type ResourceBody = { tag: 'text'; val: string } | { tag: 'blob'; val: Uint8Array };

export type Content =
  | { tag: 'text'; val: string }
  | { tag: 'image'; val: { data: Uint8Array; mediaType: string } }
  | { tag: 'audio'; val: { data: Uint8Array; mediaType: string } }
  | {
      tag: 'resource-link';
      val: { uri: string; name: string; title?: string; description?: string; mediaType?: string };
    }
  | { tag: 'embedded'; val: { uri: string; mediaType?: string; body: ResourceBody } };

export interface WitToolResult {
  content: Content[];
  /** JSON text. */
  structuredContent?: string;
  isError: boolean;
}

export interface ToolDef {
  name: string;
  title?: string;
  description?: string;
  /** JSON text. */
  inputSchema: string;
  outputSchema?: string;
  annotations?: string;
}

export interface WitToolContext {
  server: string;
  settings: string;
  secrets: [string, string][];
}

/** A tool's result, built with chained calls. */
export class ToolResult {
  static text(text: string): ToolResult;
  /** Structured content; alone, its JSON is also the text. */
  static structured(value: unknown): ToolResult;
  /** An is-error result saying `message`. */
  static error(message: string): ToolResult;
  content: Content[];
  structuredContent?: string;
  isError: boolean;
  text(text: string): this;
  image(data: Uint8Array, mediaType: string): this;
  audio(data: Uint8Array, mediaType: string): this;
  resourceLink(uri: string, name: string, extra?: { title?: string; description?: string; mediaType?: string }): this;
  /** An embedded resource: text, or bytes (a blob). */
  resource(uri: string, body: string | Uint8Array, mediaType?: string): this;
  structured(value: unknown): this;
  /** Marks it an error, adding `message` as text if given. */
  error(message?: string): this;
  toWit(): WitToolResult;
}

/** Thrown from a handler: an is-error result whose text is the message, for the model to read. */
export class ToolFailure extends Error {
  constructor(message: string);
}

/** Thrown from a handler: the call's arguments do not fit (JSON-RPC -32602). */
export class InvalidArguments extends Error {
  constructor(message: string);
  readonly kind: 'invalid-arguments';
}

/** The component's exports: `export const { info, listTools, callTool } = exportTools({...});` */
export function exportTools(plugin: {
  name: string;
  version: string;
  tools: Tool[] | ((context: ToolContext) => Tool[]);
}): {
  info(): PluginInfo;
  listTools(context: WitToolContext): ToolDef[];
  callTool(name: string, args: string, context: WitToolContext): WitToolResult;
};

// ---- Values ----

export function paramsObject(params: string, owned?: string[]): Record<string, any>;
export function messages(prompt: Prompt): Message[];
export function messageText(message: Message): string;
export function textOnly(message: Message, provider: string): string;
export function checkedBaseUrl(route: Route, example: string): string;
export function routeSettings<T extends Record<string, unknown>>(route: Route, defaults?: T): T;
export function secret(route: Route, name: string): string | undefined;
export function usage(prompt: number, completion: number, total?: number): Usage;
export function openAiUsage(value: unknown): Usage | undefined;
export function finishReason(reason: string): FinishReason;
export function modelPrices(rows: [string, number, number][]): ModelPrice[];

// ---- Host services ----

export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';

export const log: {
  trace(message: string): void;
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
  enabled(level: LogLevel): boolean;
};

export const kv: {
  get(key: string): Uint8Array | undefined;
  getText(key: string): string | undefined;
  set(key: string, value: string | Uint8Array, ttlMs?: number): void;
  delete(key: string): void;
  /** Declares a minted credential secret: the gateway redacts it from the route's answers, records and logs. */
  secret(value: string, ttlMs?: number): void;
  /** The kept text, or `refresh()`'s value: declared secret, kept for `ttlMs` (0: until evicted). */
  getOrRefresh(key: string, refresh: () => { value: string; ttlMs: number }): string;
};
