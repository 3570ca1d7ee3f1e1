// TypeScript types of the gateway's JavaScript plugin SDK (`gateway-plugin-sdk`). The values the
// gateway exchanges with a plugin are the WIT's (`wit/provider.wit`, `wit/tool.wit`,
// `wit/guard.wit`) as the component bindings give them to JavaScript: records as objects with
// camelCase fields, variants as `{tag, val}`, enums as strings, `option<T>` as `T | undefined`,
// `list<u8>` as `Uint8Array`. Those are not restated here: `types/wit/` holds jco's declarations
// generated from the package's WIT (`npm run sync-wit`; `cargo xtask test` fails when they are
// stale), and this file re-exports them under the SDK's names.

/// <reference path="./wit/provider.d.ts" />
/// <reference path="./wit/tool.d.ts" />
/// <reference path="./wit/guard.d.ts" />

import type * as Wit from 'gateway:provider/types@0.2.0';
import type * as WitTool from 'gateway:provider/tool-types@0.2.0';
import type * as WitGuard from 'gateway:provider/guard-types@0.2.0';
import type * as WitLog from 'gateway:provider/log@0.2.0';

// ---- The values of the `provider` world (wit/provider.wit, interface `types`) ----

import type {
  Audio,
  Choice,
  Chunk,
  Completion,
  CompletionRequest,
  Document,
  EmbeddingRequest,
  FinishReason,
  FunctionCall,
  FunctionChoice,
  FunctionDef,
  GeneratedImage,
  Image,
  ImageRequest,
  Images,
  ModelPrice,
  OutputLimit,
  Part,
  PluginInfo,
  Prompt,
  Reasoning,
  ReasoningConfig,
  ReasoningDelta,
  ReasoningEffort,
  RerankRequest,
  RerankResult,
  Reranking,
  Role,
  Route,
  Source,
  Speech,
  SpeechRequest,
  TextDelta,
  ToolCall,
  ToolCallDelta,
  TranscriptSegment,
  Transcription,
  TranscriptionRequest,
  UpstreamError,
  Usage,
} from 'gateway:provider/types@0.2.0';
export type {
  Audio,
  Choice,
  Chunk,
  Completion,
  CompletionRequest,
  Document,
  EmbeddingRequest,
  FinishReason,
  FunctionCall,
  FunctionChoice,
  FunctionDef,
  GeneratedImage,
  Image,
  ImageRequest,
  Images,
  ModelPrice,
  OutputLimit,
  Part,
  PluginInfo,
  Prompt,
  Reasoning,
  ReasoningConfig,
  ReasoningDelta,
  ReasoningEffort,
  RerankRequest,
  RerankResult,
  Reranking,
  Role,
  Route,
  Source,
  Speech,
  SpeechRequest,
  TextDelta,
  ToolCall,
  ToolCallDelta,
  TranscriptSegment,
  Transcription,
  TranscriptionRequest,
  UpstreamError,
  Usage,
};

/**
 * A message of a chat (the WIT's `message`). Named apart: `Message` is an AWS event-stream
 * message, as the SDK's `Message` class is.
 */
export type ChatMessage = Wit.Message;

/** The WIT's `provider-error`, as an export returns it (`ProviderError.toWit()`). */
export type WitProviderError = Wit.ProviderError;

/**
 * What `embed` returns: the WIT's `embeddings`, whose vectors may also be plain arrays of numbers
 * (the bindings lower either to `list<f32>`).
 */
export interface Embeddings extends Omit<Wit.Embeddings, 'vectors'> {
  /** One vector per input, in input order. */
  vectors: (Float32Array | number[])[];
}

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
  /** `Content-Type` without its parameters, lowercase (`''` without one). */
  mediaType(): string;
  /** Whether `Content-Type` says newline-delimited JSON (`application/x-ndjson`, `application/jsonl`, ...). */
  isNdjson(): boolean;
  /** Whether `Content-Type` says an AWS event stream (`application/vnd.amazon.eventstream`). */
  isEventStream(): boolean;
  chunk(): Uint8Array | undefined;
  close(): void;
  bytes(): Uint8Array;
  text(): string;
  json(): any;
  /** This response when 2xx; otherwise throws `ProviderError.upstream`. */
  errorForStatus(): this;
  sse(): Generator<SseEvent>;
  /** Each non-blank line as `{data}`, the line trimmed. */
  ndjson(): Generator<SseEvent>;
  /** AWS event-stream messages; a malformed frame throws `ProviderError` (`failed`). */
  eventStream(): Generator<Message>;
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
  /** `send` and `sendAudio` stand for the host's `sink.send` and `sink.send-audio`. */
  constructor(send: (chunk: Chunk) => void, sendAudio?: (bytes: Uint8Array) => void);
  static buffered(): Sink;
  /** What a buffered sink received. */
  readonly sent: Chunk[];
  /** The audio a buffered sink received (`sendAudio`), piece by piece. */
  readonly audio: Uint8Array[];
  send(chunk: Partial<Chunk>): void;
  text(index: number, text: string): void;
  /**
   * The next bytes of a speech's audio, to the caller as they arrive (nothing for no bytes).
   * Throws `failed('the caller disconnected')` once the caller is gone.
   */
  sendAudio(bytes: Uint8Array | ArrayBuffer): void;
}

export interface Decoder {
  body(body: string, answer: Answer): void;
  event(event: SseEvent, answer: Answer): void;
  /** One AWS event-stream message (needed only to read that framing). */
  message?(message: Message, answer: Answer): void;
  end?(answer: Answer): void;
}

export function readCompletion(response: Response, requestedModel: string, decoder: Decoder): Completion;
/**
 * `framing`: `'auto'` (default) by `Content-Type` (AWS event stream, NDJSON, JSON read whole, else
 * SSE); `'sse'`, `'ndjson'` or `'eventstream'` whatever the `Content-Type`.
 */
export function readStream(
  response: Response,
  sink: Sink,
  requestedModel: string,
  decoder: Decoder,
  framing?: Framing,
): Completion;

// ---- Stream framings ----

/** How a streamed body is cut into events. */
export type Framing = 'auto' | 'sse' | 'ndjson' | 'eventstream';
export const FRAMINGS: readonly Framing[];

/** An NDJSON line parser: each complete non-blank line as `{data}`. */
export class NdjsonParser {
  push(bytes: Uint8Array): SseEvent[];
  finish(): SseEvent | undefined;
}

/**
 * A header value of an AWS event stream: boolean (types 0/1), number (byte, short, int), bigint
 * (long, timestamp in ms), Uint8Array (bytes, UUID), string.
 */
export type HeaderValue = boolean | number | bigint | Uint8Array | string;

/** An error the upstream sent inside an event stream; `toString()` is `kind: message`. */
export class MessageException {
  readonly kind: string;
  readonly message: string;
  toString(): string;
}

/** One message (frame) of an AWS event stream. */
export class Message {
  constructor(headers?: [string, HeaderValue][], payload?: Uint8Array);
  headers: [string, HeaderValue][];
  payload: Uint8Array;
  /** The first header named exactly `name` (case-sensitive). */
  header(name: string): HeaderValue | undefined;
  stringHeader(name: string): string | undefined;
  /** `:event-type`. */
  readonly eventType: string | undefined;
  /** `:message-type`. */
  readonly messageType: string | undefined;
  /** The payload as text (UTF-8). */
  text(): string;
  /** For `:message-type` `exception` or `error`: its kind and text. */
  exception(): MessageException | undefined;
}

/** A malformed event stream (checksum, lengths, header types, a frame cut short). */
export class FrameError extends Error {}

/** An incremental AWS event-stream parser; throws `FrameError`. */
export class EventStreamParser {
  push(bytes: Uint8Array): Message[];
  finish(): void;
}

/** One frame, for tests and fake upstreams: `[name, value]` or `[name, value, wireType]` headers. */
export function encodeEventStream(
  headers: ([string, HeaderValue] | [string, HeaderValue, number])[],
  payload?: Uint8Array | string,
): Uint8Array;

// ---- Providers ----

export abstract class StreamDecoder implements Decoder {
  /** Reads a whole answer; call `answer.complete()` when it is complete. */
  abstract body(body: string, answer: Answer): void;
  /** Reads one stream event (SSE, or an NDJSON line). Default: `[DONE]` ends, empty data is skipped, else `body`. */
  event(event: SseEvent, answer: Answer): void;
  /** Reads one AWS event-stream message. Default: an exception is `failed`, else `body(payload text)`. */
  message(message: Message, answer: Answer): void;
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
  /** How `completeStream` cuts the streamed body into events (default `'auto'`). */
  static FRAMING: Framing;
  abstract info(): PluginInfo;
  abstract request(call: CompletionRequest, stream: boolean): Request;
  /** A fresh decoder per call: by default `new this.constructor()`. */
  decoder(): Decoder;
  complete(call: CompletionRequest): Completion;
  completeStream(call: CompletionRequest, sink: Sink): Completion;
  embed(call: EmbeddingRequest): Embeddings;
  /** Default: `undefined`, the gateway counts. */
  countTokens(call: CompletionRequest): TokenCount | undefined;
  /** The documents by relevance to the query, the most relevant first. Default: not supported (400). */
  rerank(call: RerankRequest): Reranking;
  /** `call.n` images made from `call.prompt`. Default: not supported (400). */
  generateImages(call: ImageRequest): Images;
  /** `call.audio` written down. Default: not supported (400). */
  transcribe(call: TranscriptionRequest): Transcription;
  /**
   * `call.input` spoken: the audio through `sink.sendAudio` as it arrives, then how the speech
   * ended. Default: not supported (400).
   */
  speak(call: SpeechRequest, sink: Sink): Speech;
}

/** How many tokens a prompt takes; `estimated` unless it is the provider's own count. */
export interface TokenCount {
  inputTokens: number;
  estimated: boolean;
}

export interface Provider {
  info(): PluginInfo;
  complete(call: CompletionRequest): Completion;
  completeStream(call: CompletionRequest, sink: Sink): Completion;
  embed(call: EmbeddingRequest): Embeddings;
  /** Optional: without it, the gateway counts. */
  countTokens?(call: CompletionRequest): TokenCount | undefined;
  /** Optional: without it, `<name> does not support rerank` (400). */
  rerank?(call: RerankRequest): Reranking;
  /** Optional: without it, `<name> does not support image generation` (400). */
  generateImages?(call: ImageRequest): Images;
  /** Optional: without it, `<name> does not support transcription` (400). */
  transcribe?(call: TranscriptionRequest): Transcription;
  /** Optional (the audio through `sink.sendAudio`): without it, `<name> does not support speech` (400). */
  speak?(call: SpeechRequest, sink: Sink): Speech;
}

/** The component's exports: `export const { info, complete, completeStream, embed, countTokens, rerank, generateImages, transcribe, speak } = exportProvider(p);` */
export function exportProvider(provider: Provider): {
  info(): PluginInfo;
  complete(request: CompletionRequest): Completion;
  completeStream(request: CompletionRequest): Completion;
  embed(request: EmbeddingRequest): Embeddings;
  countTokens(request: CompletionRequest): TokenCount | undefined;
  rerank(request: RerankRequest): Reranking;
  generateImages(request: ImageRequest): Images;
  transcribe(request: TranscriptionRequest): Transcription;
  speak(request: SpeechRequest): Speech;
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

import type {
  Content,
  EmbeddedResource,
  Media,
  ResourceBody,
  ResourceLink,
  ToolDef,
} from 'gateway:provider/tool-types@0.2.0';
export type {
  Content,
  EmbeddedResource,
  Media,
  ResourceBody,
  ResourceLink,
  ToolDef,
};

/** The WIT's `tool-result`, as `callTool` returns it. */
export type WitToolResult = WitTool.ToolResult;

/** The WIT's `tool-context`, as the gateway passes it. */
export type WitToolContext = WitTool.ToolContext;

/** The WIT's `tool-error`, as `callTool` throws it (`{payload}`). */
export type WitToolError = WitTool.ToolError;

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
  listTools(context: WitToolContext): WitTool.ToolDef[];
  callTool(name: string, args: string, context: WitToolContext): WitToolResult;
};

// ---- Values ----

export function paramsObject(params: string, owned?: string[]): Record<string, any>;
export function messages(prompt: Prompt): ChatMessage[];
export function messageText(message: ChatMessage): string;
export function textOnly(message: ChatMessage, provider: string): string;
export function checkedBaseUrl(route: Route, example: string): string;
export function routeSettings<T extends Record<string, unknown>>(route: Route, defaults?: T): T;
export function secret(route: Route, name: string): string | undefined;
export function usage(prompt: number, completion: number, total?: number): Usage;
export function openAiUsage(value: unknown): Usage | undefined;
export function finishReason(reason: string): FinishReason;
export function modelPrices(rows: [string, number, number][]): ModelPrice[];

// ---- Host services ----

export type LogLevel = WitLog.Level;

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

// ---- Guards (wit/guard.wit) ----

import type {
  AnswerRewrite,
  AnswerVerdict,
  Change,
  CheckedRequest,
  RequestRewrite,
  RequestVerdict,
} from 'gateway:provider/guard-types@0.2.0';
export type {
  AnswerRewrite,
  AnswerVerdict,
  Change,
  CheckedRequest,
  RequestRewrite,
  RequestVerdict,
};

/** What the request asks the model: a prompt (text or chat), or an embeddings request's texts. */
export type GuardInput = WitGuard.Input;

/** Let it through unchanged. */
export class Allow {}

/** Refuse it, for `reason` (shown to the caller and recorded). */
export class Deny {
  constructor(reason: string);
  readonly reason: string;
}

/** Send (or answer) these texts instead; `changes` counts what changed by kind. */
export class Rewrite {
  constructor(texts: string[], changes: Record<string, number>);
  readonly texts: string[];
  readonly changes: Record<string, number>;
}

export type Verdict = Allow | Deny | Rewrite;

export function allow(): Allow;
/** Name the rule that matched, never the text, nor the guard: the gateway names it. */
export function deny(reason: string): Deny;
/** The texts of `texts(...)`, in the same order and number, some changed; the counts by kind are recorded. */
export function rewrite(texts: string[], changes?: Record<string, number>): Rewrite;

/** The texts of a request (its input's), an input, a prompt, or an answer (one per choice), in order. */
export function texts(of: GuardRequest | GuardInput | Prompt | Completion): string[];

/** What a guard is shown of a call. */
export class GuardRequest {
  constructor(raw: CheckedRequest);
  readonly raw: CheckedRequest;
  readonly guard: string;
  readonly route: string;
  readonly model: string;
  readonly input: GuardInput;
  readonly functions: FunctionDef[];
  /** `settings` over `defaults`; with defaults, an unknown or mistyped setting fails the guard. */
  settings<T extends Record<string, unknown>>(defaults?: T): T;
  /** The caller's pass-through parameters. */
  params(): Record<string, any>;
  texts(): string[];
}

/** A guard: set `static NAME` and `static VERSION`; both checks allow by default. Synchronous. */
export class Guard {
  static NAME: string;
  static VERSION: string;
  info(): PluginInfo;
  checkRequest(request: GuardRequest): Verdict;
  /** `answer` is the whole answer (for a stream, once it has ended). */
  checkResponse(request: GuardRequest, answer: Completion): Verdict;
}

/** The component's exports: `export const { info, checkRequest, checkResponse } = exportGuard(MyGuard);` */
export function exportGuard(guard: new () => Guard): {
  info(): PluginInfo;
  checkRequest(request: CheckedRequest): RequestVerdict;
  checkResponse(request: CheckedRequest, answer: Completion): AnswerVerdict;
};
