// Outbound HTTP, a plugin's only way out of its sandbox: the gateway performs the requests, only
// the host (and port) of the route's `base_url` is reachable, and the call's deadline applies.

import { ProviderError, upstreamError } from './errors.js';
import { hostImport } from './host.js';
import { log } from './log.js';
import { EventStreamParser, FrameError } from './eventstream.js';
import { NdjsonParser } from './ndjson.js';
import { SseParser } from './sse.js';

const encoder = new TextEncoder();

/** The media types `Response.isNdjson()` recognizes as newline-delimited JSON. */
export const NDJSON_TYPES = [
  'application/x-ndjson',
  'application/ndjson',
  'application/jsonl',
  'application/x-jsonlines',
  'application/jsonlines',
];

/** An outbound HTTP request, built with chained calls and performed by `send()`. */
export class Request {
  /**
   * @param {string} method
   * @param {string} url
   */
  constructor(method, url) {
    this.method = method;
    this.url = url;
    /** @type {[string, string][]} */
    this.headers = [];
    this.bodyBytes = new Uint8Array(0);
  }

  /** A `POST` request to `url`. */
  static post(url) {
    return new Request('POST', url);
  }

  /** A `GET` request to `url`. */
  static get(url) {
    return new Request('GET', url);
  }

  /** Adds a header (headers with the same name are all sent). */
  header(name, value) {
    this.headers.push([name, value]);
    return this;
  }

  /** Sets header `name` to `value`, replacing any set before. */
  replaceHeader(name, value) {
    const lower = name.toLowerCase();
    this.headers = this.headers.filter(([n]) => n.toLowerCase() !== lower);
    return this.header(name, value);
  }

  /** Sets `Authorization: Bearer <key>`. */
  bearer(key) {
    return this.replaceHeader('authorization', `Bearer ${key}`);
  }

  /**
   * Adds the provider key when there is one (non-empty; local servers often need none): in the
   * header `header` (e.g. `x-api-key`), or as `Authorization: Bearer` when `header` is omitted.
   */
  apiKey(key, header) {
    if (!key) {
      return this;
    }
    return header ? this.header(header, key) : this.bearer(key);
  }

  /** Asks for an event stream (`Accept: text/event-stream`) when `stream`, else JSON. */
  streaming(stream) {
    return this.replaceHeader('accept', stream ? 'text/event-stream' : 'application/json');
  }

  /** Sets the body to `value` as JSON, and `Content-Type: application/json`. */
  json(value) {
    this.bodyBytes = encoder.encode(JSON.stringify(value));
    return this.replaceHeader('content-type', 'application/json');
  }

  /** Sets the body: a string (sent as UTF-8) or bytes; set `Content-Type` with `header`. */
  body(body) {
    this.bodyBytes = typeof body === 'string' ? encoder.encode(body) : body;
    return this;
  }

  /** The value of the first header named `name` (case-insensitively). */
  headerValue(name) {
    return findHeader(this.headers, name);
  }

  /**
   * Sends the request through the gateway; returns the `Response` once its status and headers
   * arrived. Every status is a successful send (see `Response.errorForStatus`). Failures are
   * `ProviderError`s: `timeout` when the upstream did not answer in time, `failed` otherwise (a
   * forbidden host, a connection failure, an invalid URL). The request line is logged at debug
   * level (never headers or body: send keys in headers, not in the URL).
   */
  send() {
    if (log.enabled('debug')) {
      log.debug(`${this.method} ${this.url}`);
    }
    const http = hostImport('http');
    let response;
    try {
      response = http.send({
        method: this.method,
        url: this.url,
        headers: this.headers,
        body: this.bodyBytes,
      });
    } catch (error) {
      throw httpError(error, 'sending the request');
    }
    return new Response(response.status, response.headers, response.body);
  }
}

/** A response: status and headers, and a body read in chunks as it arrives. */
export class Response {
  /**
   * @param {number} status
   * @param {[string, string][]} headers
   * @param {{read(): Uint8Array | undefined} | Uint8Array[]} body the host's body, or chunks
   */
  constructor(status, headers, body) {
    this.status = status;
    this.headers = headers;
    this.source = body;
  }

  /** A response whose body is `chunks` (strings or bytes): for testing a decoder under Node. */
  static fromChunks(status, headers, chunks) {
    const bytes = chunks.map((chunk) => (typeof chunk === 'string' ? encoder.encode(chunk) : chunk));
    return new Response(status, headers, bytes);
  }

  /** The value of the first header named `name` (case-insensitively). */
  header(name) {
    return findHeader(this.headers, name);
  }

  /** Whether the status is 2xx. */
  get ok() {
    return this.status >= 200 && this.status < 300;
  }

  /** Whether `Content-Type` says JSON (a server that ignored the request to stream). */
  isJson() {
    // The media type itself: `application/jsonl` is newline-delimited JSON, not JSON.
    return this.mediaType() === 'application/json';
  }

  /** `Content-Type` without its parameters, lowercase (`''` without one). */
  mediaType() {
    return (this.header('content-type') ?? '').split(';', 1)[0].trim().toLowerCase();
  }

  /**
   * Whether `Content-Type` says newline-delimited JSON (`application/x-ndjson`,
   * `application/ndjson`, `application/jsonl`, `application/x-jsonlines`,
   * `application/jsonlines`; any parameters and letter case), which `ndjson()` reads.
   */
  isNdjson() {
    return NDJSON_TYPES.includes(this.mediaType());
  }

  /**
   * Whether `Content-Type` says an AWS event stream (`application/vnd.amazon.eventstream`, any
   * parameters and letter case), which `eventStream()` reads.
   */
  isEventStream() {
    return this.mediaType() === 'application/vnd.amazon.eventstream';
  }

  /**
   * The next body chunk as it arrives, `undefined` at its end. Errors: `timeout` when the next
   * chunk did not arrive in time, `failed` for a broken connection or a body larger than the
   * gateway allows.
   *
   * @returns {Uint8Array | undefined}
   */
  chunk() {
    for (;;) {
      let next;
      if (this.source === undefined) {
        return undefined;
      } else if (Array.isArray(this.source)) {
        next = this.source.shift();
      } else {
        try {
          next = this.source.read();
        } catch (error) {
          this.close();
          throw httpError(error, 'reading the answer');
        }
      }
      if (next === undefined || next === null) {
        this.close();
        return undefined;
      }
      // Empty chunks carry nothing.
      if (next.length > 0) {
        return next;
      }
    }
  }

  /** Releases the host's body at once (also done when it has been read to its end). */
  close() {
    const source = this.source;
    this.source = undefined;
    if (source && !Array.isArray(source)) {
      source[Symbol.dispose]?.();
    }
  }

  /** Reads the whole body. */
  bytes() {
    const chunks = [];
    let length = 0;
    for (let chunk = this.chunk(); chunk !== undefined; chunk = this.chunk()) {
      chunks.push(chunk);
      length += chunk.length;
    }
    if (chunks.length === 1) {
      return chunks[0];
    }
    const body = new Uint8Array(length);
    let at = 0;
    for (const chunk of chunks) {
      body.set(chunk, at);
      at += chunk.length;
    }
    return body;
  }

  /** Reads the whole body as text (UTF-8). */
  text() {
    return new TextDecoder().decode(this.bytes());
  }

  /** Reads the whole body and parses it as JSON; a body that does not parse is `failed`. */
  json() {
    const text = this.text();
    try {
      return JSON.parse(text);
    } catch (error) {
      throw ProviderError.malformed(error);
    }
  }

  /**
   * The response itself when its status is 2xx; otherwise reads the body and throws
   * `ProviderError.upstream` with the status, the provider's message and `Retry-After`.
   */
  errorForStatus() {
    if (this.ok) {
      return this;
    }
    let body = '';
    try {
      body = this.text();
    } catch {
      // The status says what matters; a body that fails to arrive only costs the message.
    }
    throw upstreamError(this.status, body, this.header('retry-after'));
  }

  /**
   * The body as Server-Sent Events, read lazily: each event once complete (a last one without its
   * blank line included).
   *
   * @returns {Generator<import('./sse.js').SseEvent>}
   */
  *sse() {
    const parser = new SseParser();
    for (let chunk = this.chunk(); chunk !== undefined; chunk = this.chunk()) {
      yield* parser.push(chunk);
    }
    const last = parser.finish();
    if (last) {
      yield last;
    }
  }

  /**
   * The body as newline-delimited JSON, read lazily: each non-blank line, once complete, as an
   * event `{data}` whose `data` is the line (a last line without its newline included).
   *
   * @returns {Generator<import('./sse.js').SseEvent>}
   */
  *ndjson() {
    const parser = new NdjsonParser();
    for (let chunk = this.chunk(); chunk !== undefined; chunk = this.chunk()) {
      yield* parser.push(chunk);
    }
    const last = parser.finish();
    if (last) {
      yield last;
    }
  }

  /**
   * The body as AWS event-stream messages, read lazily: each once its frame is whole. A malformed
   * frame or a body that ends inside a frame throws `ProviderError.malformed` (`failed`:
   * "malformed response from upstream: invalid event stream: ...") after the messages before it.
   *
   * @returns {Generator<import('./eventstream.js').Message>}
   */
  *eventStream() {
    const parser = new EventStreamParser();
    const read = (step) => {
      try {
        return step();
      } catch (error) {
        throw error instanceof FrameError
          ? ProviderError.malformed(`invalid event stream: ${error.message}`)
          : error;
      }
    };
    for (let chunk = this.chunk(); chunk !== undefined; chunk = this.chunk()) {
      yield* read(() => parser.push(chunk));
      // A fault after those messages is held back until the next push: ask now.
      read(() => parser.push(new Uint8Array(0)));
    }
    read(() => parser.finish());
  }
}

function findHeader(headers, name) {
  const lower = name.toLowerCase();
  const found = headers.find(([n]) => n.toLowerCase() === lower);
  return found?.[1];
}

/** A failed host call (the WIT's `http-error`) as a `ProviderError`. */
function httpError(error, doing) {
  const payload = error?.payload;
  if (!payload || typeof payload.tag !== 'string') {
    return ProviderError.failed(`HTTP failure ${doing}: ${error}`);
  }
  switch (payload.tag) {
    case 'timeout':
      return ProviderError.timeout(`the provider did not answer in time (${doing}): ${payload.val}`);
    case 'forbidden-host':
      return ProviderError.failed(
        `the gateway does not allow requests to ${payload.val}; only the route's base_url is reachable`,
      );
    case 'too-large':
      return ProviderError.failed(
        `the provider's answer is larger than the gateway allows (${payload.val} bytes)`,
      );
    case 'invalid-request':
      return ProviderError.failed(`invalid HTTP request: ${payload.val}`);
    default:
      return ProviderError.failed(`HTTP failure ${doing}: ${payload.val}`);
  }
}
