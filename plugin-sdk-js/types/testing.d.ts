// TypeScript types of `gateway-plugin-sdk/testing`, the SDK's fake host (src/testing/index.js).

/// <reference path="./wit/provider.d.ts" />
/// <reference path="./wit/tool.d.ts" />
/// <reference path="./wit/guard.d.ts" />

import type * as Wit from 'gateway:provider/types@0.2.0';
import type * as WitTool from 'gateway:provider/tool-types@0.2.0';
import type * as WitGuard from 'gateway:provider/guard-types@0.2.0';
import type { Embeddings } from './index.js';

/** The route `base_url` of a `Call` that sets none: `http://upstream.test`. */
export const BASE_URL: string;

/** A plugin's exports, as its module gives them (`import * as plugin from '../index.js'`). */
export interface ProviderExports {
  complete?(request: Wit.CompletionRequest): Wit.Completion;
  completeStream?(request: Wit.CompletionRequest): Wit.Completion;
  embed?(request: Wit.EmbeddingRequest): Embeddings | Wit.Embeddings;
  speak?(request: Wit.SpeechRequest): Wit.Speech;
}
export interface GuardExports {
  checkRequest?(request: WitGuard.CheckedRequest): WitGuard.RequestVerdict;
  checkResponse?(request: WitGuard.CheckedRequest, answer: Wit.Completion): WitGuard.AnswerVerdict;
}
export interface ToolExports {
  listTools?(context: WitTool.ToolContext): WitTool.ToolDef[];
  callTool?(name: string, args: string, context: WitTool.ToolContext): WitTool.ToolResult;
}

/** A request the plugin sent, as the gateway received it. */
export class SentRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: [string, string][];
  readonly body: Uint8Array;
  /** The first header named `name` (case-insensitively). */
  headerValue(name: string): string | undefined;
  text(): string;
  json(): any;
}

/** The WIT's `http-error`, thrown by the fake HTTP import (`httpError`). */
export interface HttpFailure {
  payload: import('gateway:provider/http@0.2.0').HttpError;
}

/** An upstream's answer; an `HttpFailure` among the chunks fails that read. */
export interface UpstreamResponse {
  status: number;
  headers: [string, string][];
  chunks: (string | Uint8Array | HttpFailure)[];
}

/** A test's upstream: the answer to each request the plugin sends (or a thrown `httpError`). */
export type Upstream = (request: SentRequest) => UpstreamResponse;

/** What a run did. */
export class Run<T, E = never> {
  /** What the export returned; `undefined` after an error or a crash. */
  result: T | undefined;
  /** The WIT error the export returned instead (`{tag, val}`). */
  error: E | undefined;
  /** The line logged when the plugin threw something else than a `ProviderError`: a bug. */
  crash: string | undefined;
  /** The requests sent, in order (a refused one too). */
  sent: SentRequest[];
  /** The chunks the caller was sent (a stream). */
  chunks: Wit.Chunk[];
  /** The audio the caller was sent (`speak`), piece by piece. */
  audio: Uint8Array[];
  /** The lines the run logged, `[level, message]`. */
  logs: [string, string][];
  /** The streamed text of `choice` (default 0), as the caller received it. */
  streamedText(choice?: number): string;
  /** The audio the caller received (`speak`), whole. */
  streamedAudio(): Uint8Array;
  /** The result, or an `Error` thrown saying why there is none. */
  unwrap(): T;
}

/** A completion (or embeddings, or speech) request as the gateway passes a provider, and its runs. */
export class Call {
  static text(model: string, prompt: string): Call;
  static chat(model: string, messages: Wit.Message[]): Call;
  static embedding(model: string, input: string[]): Call;
  /** `input` spoken in `voice` (default `alloy`) as `format` (default `mp3`): run it with `speak`. */
  static speech(model: string, input: string, voice?: string, format?: string): Call;
  /** The request as built, to change what the builder does not reach. */
  request: Wit.CompletionRequest | Wit.EmbeddingRequest | Wit.SpeechRequest;
  baseUrl(url: string): this;
  apiKey(key: string): this;
  settings(settings: Record<string, unknown>): this;
  secret(name: string, value: string): this;
  params(params: Record<string, unknown>): this;
  output(maxTokens: number | undefined, choices?: number): this;
  /** The sink refuses every chunk (piece of audio) after `count`: the caller went away. */
  callerGoneAfter(count: number): this;
  complete(plugin: ProviderExports, upstream?: Upstream): Run<Wit.Completion, Wit.ProviderError>;
  stream(plugin: ProviderExports, upstream?: Upstream): Run<Wit.Completion, Wit.ProviderError>;
  embed(plugin: ProviderExports, upstream?: Upstream): Run<Embeddings | Wit.Embeddings, Wit.ProviderError>;
  /** The audio the caller was sent is `run.audio`. */
  speak(plugin: ProviderExports, upstream?: Upstream): Run<Wit.Speech, Wit.ProviderError>;
}

/** A request as the gateway shows a guard, and its runs. */
export class GuardCall {
  static prompt(prompt: string): GuardCall;
  static chat(messages: Wit.Message[]): GuardCall;
  static embedding(texts: string[]): GuardCall;
  request: WitGuard.CheckedRequest;
  guard(id: string): this;
  route(id: string): this;
  model(model: string): this;
  settings(settings: Record<string, unknown>): this;
  params(params: Record<string, unknown>): this;
  checkRequest(plugin: GuardExports): Run<WitGuard.RequestVerdict>;
  /** `answer`: a completion, or its choices' texts. */
  checkResponse(plugin: GuardExports, answer: Wit.Completion | string[]): Run<WitGuard.AnswerVerdict>;
}

/** A call of a tool server, and its runs. */
export class ToolCall {
  static server(id?: string): ToolCall;
  context: WitTool.ToolContext;
  settings(settings: Record<string, unknown>): this;
  secret(name: string, value: string): this;
  /** Hosts (`api.example.com`, or with a port) the tool may reach. */
  allowHosts(...hosts: string[]): this;
  listTools(plugin: ToolExports): Run<WitTool.ToolDef[], WitTool.ToolError>;
  /** `args`: an object, or JSON text. */
  callTool(plugin: ToolExports, name: string, args: unknown, upstream?: Upstream): Run<WitTool.ToolResult, WitTool.ToolError>;
}

export function response(status: number, headers: [string, string][], chunks: (string | Uint8Array | HttpFailure)[]): UpstreamResponse;
export function json(status: number, value: unknown): UpstreamResponse;
/** Each `data` a string, or a value sent as JSON. */
export function sse(data: unknown[]): UpstreamResponse;
export function ndjson(values: unknown[]): UpstreamResponse;
export function httpError(tag: import('gateway:provider/http@0.2.0').HttpError['tag'], val: string | number | bigint): HttpFailure;
/** A chat message: `content` a string (one text part) or parts. */
export function message(role: Wit.Role, content: string | Wit.Part[], extra?: Partial<Wit.Message>): Wit.Message;
/** A completion of one choice per text. */
export function completion(texts: string[], model?: string): Wit.Completion;

/** The fake host's state that outlives a run. */
export const fakeHost: {
  readonly logs: [string, string][];
  readonly kv: Map<string, { value: Uint8Array; expires: number }>;
  readonly secrets: { value: string; ttlMs: number }[];
  setLogLevel(level: import('gateway:provider/log@0.2.0').Level): void;
  reset(): void;
};
