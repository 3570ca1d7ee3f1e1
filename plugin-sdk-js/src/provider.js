// A provider plugin: the functions the gateway calls, and the drivers that make an `HttpProvider`
// (one upstream request per completion) a whole provider.

import { readCompletion, readStream, Sink } from './answer.js';
import { callPlugin, crash } from './crash.js';
import { ProviderError } from './errors.js';
import { hostImport } from './host.js';

/**
 * One provider's answer format: what `readCompletion` and `readStream` need to know of it.
 * Subclasses implement `body`; the default `event` suits APIs whose events each carry a JSON piece
 * of the answer.
 */
export class StreamDecoder {
  /**
   * Reads a whole answer (or the JSON answer a server sent in one piece although a stream was
   * asked for). Call `answer.complete()` when the body is a complete answer.
   *
   * @param {string} body
   * @param {import('./answer.js').Answer} answer
   */
  body(body, answer) {
    throw new Error(`${this.constructor.name} does not implement body(body, answer)`);
  }

  /**
   * Reads one event of a streamed answer: a Server-Sent Event, or one line of an NDJSON stream
   * (`{data}`, the line). Call `answer.complete()` when the upstream says the answer is whole,
   * `answer.end()` at its end marker (no more events are read).
   *
   * Default: `data: [DONE]` (OpenAI's end marker) ends the answer, empty data is skipped, any
   * other data is read with `body`.
   *
   * @param {import('./sse.js').SseEvent} event
   * @param {import('./answer.js').Answer} answer
   */
  event(event, answer) {
    const data = event.data.trim();
    if (data === '[DONE]') {
      answer.end();
    } else if (data !== '') {
      this.body(data, answer);
    }
  }

  /**
   * Reads one message of an AWS event stream (as Amazon Bedrock streams), as `event` reads one
   * Server-Sent Event.
   *
   * Default: an error the upstream sent in the stream (`:message-type` `exception` or `error`, see
   * `Message.exception()`) is `ProviderError.failed('<exception type>: <message>')`; any other
   * message's payload is read (as text) with `body`. Override it to tell events apart by
   * `message.eventType`, or to map exceptions to other errors (a throttling exception to an
   * upstream 429).
   *
   * @param {import('./eventstream.js').Message} message
   * @param {import('./answer.js').Answer} answer
   */
  message(message, answer) {
    const exception = message.exception();
    if (exception) {
      throw ProviderError.failed(String(exception));
    }
    this.body(message.text(), answer);
  }

  /** Called once after the body or the last event of a complete answer. Default: nothing. */
  end(answer) {}
}

const decoder = new TextDecoder();

/**
 * Refuses (`failed`: the plugin's fault, not the caller's) an upstream `body` that asks for more
 * than the gateway's output `limit` (`call.output`: `maxTokens` a choice, reasoning included, and
 * `choices`), or that leaves the answer's length to the provider while the gateway set one. The
 * gateway reserved the request's tokens and cost for exactly that limit. Without one (`maxTokens`
 * absent) every body passes. `fields` says where the body states the length: paths of object keys
 * from its top, `{maxTokens: [['max_tokens']], choices: [['n']]}` (`HttpProvider`'s `OUTPUT`).
 * A key that repeats in the body is read as `JSON.parse` reads it (its last occurrence).
 *
 * @param {{maxTokens?: number, choices: number}} limit
 * @param {{maxTokens: string[][], choices?: string[][]} | undefined} fields
 * @param {Uint8Array} body
 */
export function checkOutput(limit, fields, body) {
  const most = limit?.maxTokens;
  if (most === undefined || most === null) {
    return;
  }
  if (!fields) {
    throw ProviderError.failed(
      `the plugin names no OUTPUT fields, so the gateway's output limit cannot be checked (${most} tokens reserved): the request was not sent`,
    );
  }
  let parsed;
  try {
    parsed = JSON.parse(decoder.decode(body));
  } catch (error) {
    throw ProviderError.failed(`the upstream request is not JSON: ${error?.message ?? error}`);
  }
  const at = (path) =>
    path.reduce((value, key) => (value !== null && typeof value === 'object' && !Array.isArray(value) ? value[key] : undefined), parsed);
  let bounded = false;
  for (const [paths, bound, tokens] of [
    [fields.maxTokens ?? [], most, true],
    [fields.choices ?? [], limit.choices, false],
  ]) {
    for (const path of paths) {
      const value = at(path);
      if (value === undefined || (value === null && !tokens)) {
        continue;
      }
      if (!Number.isSafeInteger(value) || value < 0 || value > bound) {
        throw ProviderError.failed(
          `the plugin asked its upstream for ${path.join('.')} = ${JSON.stringify(value)}, more than the gateway's limit of ${bound} (which is what it reserved): the request was not sent`,
        );
      }
      bounded ||= tokens;
    }
  }
  if (!bounded) {
    const names = (fields.maxTokens ?? []).map((path) => path.join('.')).join(' or ');
    throw ProviderError.failed(
      `the plugin left the answer's length to its upstream (no ${names}), but the gateway reserved ${most} tokens a choice: the request was not sent`,
    );
  }
}

/**
 * A provider that answers each completion with one upstream HTTP request: implement `info()`,
 * `request(call, stream)` and the decoder's `body(body, answer)` (a provider is its own
 * `StreamDecoder`: a fresh instance of its class reads each answer, so it may keep state between
 * the events of one stream). Export it with `exportProvider`.
 */
export class HttpProvider extends StreamDecoder {
  /**
   * How `completeStream` cuts the streamed body into events (see `readStream`): `'auto'` by
   * `Content-Type`; `'sse'`, `'ndjson'` or `'eventstream'` whatever the `Content-Type` says.
   */
  static FRAMING = 'auto';

  /**
   * Describes the plugin: `{name, version, models}` (see `modelPrices`). Called once at load.
   * @returns {{name: string, version: string, models: {model: string, inputPerMtok: number, outputPerMtok: number}[]}}
   */
  info() {
    throw new Error(`${this.constructor.name} does not implement info()`);
  }

  /**
   * The upstream request for `call` (a `completion-request`), asking for an event stream when
   * `stream`, for no more than `call.output`: write that limit into the body, and name where in
   * the class's `static OUTPUT = {maxTokens: [[...]], choices: [[...]]}` (see `checkOutput`; a
   * class without one is refused whenever the gateway sets a limit).
   * @returns {import('./http.js').Request}
   */
  request(call, stream) {
    throw new Error(`${this.constructor.name} does not implement request(call, stream)`);
  }

  /** The decoder of one call's answer: by default a fresh instance of the provider's class. */
  decoder() {
    return new this.constructor();
  }

  /** `request`, unless it asks for more than the gateway's output limit (`checkOutput`). */
  checkedRequest(call, stream) {
    const request = this.request(call, stream);
    checkOutput(call.output, this.constructor.OUTPUT, request.bodyBytes);
    return request;
  }

  /** Performs a completion and returns the whole answer. */
  complete(call) {
    const response = this.checkedRequest(call, false).send();
    return readCompletion(response, call.model, this.decoder());
  }

  /** Performs a completion, sending its pieces through `sink` as they arrive. */
  completeStream(call, sink) {
    const response = this.checkedRequest(call, true).send();
    return readStream(response, sink, call.model, this.decoder(), this.constructor.FRAMING ?? 'auto');
  }

  /** Computes embeddings (`{model, vectors, usage}`). Default: not supported (400). */
  embed(call) {
    throw ProviderError.invalidRequest(`${this.info().name} does not support embeddings`);
  }

  /**
   * How many tokens `call`'s prompt takes (`{inputTokens, estimated}`), asked of the provider
   * where it has an endpoint for it. Default: `undefined`, the gateway counts (with the model's
   * tokenizer where it has it, an estimate otherwise).
   */
  countTokens(call) {
    return undefined;
  }

  /**
   * `call.documents` (a `rerank-request`) ordered by their relevance to `call.query`, the most
   * relevant first, at most `call.topN` of them: `{model, results: [{index, relevanceScore}],
   * usage, searchUnits}`. Default: not supported (400).
   */
  rerank(call) {
    throw unsupported(this, 'rerank');
  }

  /**
   * `call.n` images made from `call.prompt` (an `image-request`, with `size`, `quality` and the
   * caller's other keys in `params`): `{model, images: [{source: {tag: 'bytes', val:
   * Uint8Array} | {tag: 'url', val}, mediaType, revisedPrompt}], usage, size, quality}`.
   * Default: not supported (400).
   */
  generateImages(call) {
    throw unsupported(this, 'image generation');
  }

  /**
   * `call.audio` (a `transcription-request`: the file's bytes, `fileName`, `mediaType`,
   * `translate`, and the caller's other form fields in `params`) written down: `{model, text,
   * language, duration, segments: [{start, end, text}], words, usage, seconds}`. Default: not
   * supported (400).
   */
  transcribe(call) {
    throw unsupported(this, 'transcription');
  }

  /**
   * `call.input` (a `speech-request`) spoken in `call.voice`, as `call.format` (`mp3`, `opus`,
   * `aac`, `flac`, `wav` or `pcm`; the caller's other keys, `speed`, `instructions`..., in
   * `params`): the audio sent through `sink.sendAudio(bytes)` as the upstream sends it, then
   * `{model, usage}` (the tokens where the provider bills speech by them, else `undefined`).
   * Default: not supported (400).
   */
  speak(call, sink) {
    throw unsupported(this, 'speech');
  }
}

/** What a provider without an optional function answers: the caller's request was wrong for
 * the route. */
function unsupported(provider, what) {
  return ProviderError.invalidRequest(`${provider.info().name} does not support ${what}`);
}

/**
 * The functions the component exports (the `provider` world's `info`, `complete`,
 * `complete-stream`, `embed`, `count-tokens`, `rerank`, `generate-images`, `transcribe`,
 * `speak`) for `provider` (an `HttpProvider`, or any object with `info`, `complete(call)`,
 * `completeStream(call, sink)`, `embed(call)` and, optionally, `countTokens(call)`,
 * `rerank(call)`, `generateImages(call)`, `transcribe(call)` and `speak(call, sink)`). Export
 * them all from the plugin's module (the build refuses a module that lacks one):
 *
 *     export const {
 *       info, complete, completeStream, embed, countTokens, rerank, generateImages, transcribe,
 *       speak,
 *     } = exportProvider(new MyProvider());
 *
 * Thrown `ProviderError`s become the WIT's `provider-error`; any other exception is a bug: logged
 * once and ending the instance (`crash`), the caller gets the gateway's `plugin_error` (502).
 */
export function exportProvider(provider) {
  const call = (run) => {
    try {
      return callPlugin(run);
    } catch (error) {
      if (!(error instanceof ProviderError)) {
        return crash(error);
      }
      // The bindings return a thrown value's `payload` as the result's error.
      throw { payload: error.toWit() };
    }
  };
  // An export a provider may leave out: its answer (to the request, and `rest`: `speak`'s sink),
  // or the 400 `HttpProvider`'s default gives.
  const optional = (method, what, request, ...rest) => {
    if (typeof provider[method] !== 'function') {
      throw unsupported(provider, what);
    }
    return provider[method](request, ...rest);
  };
  // The caller's end of a stream: the host's `sink` import.
  const hostSink = () =>
    new Sink(
      (chunk) => hostImport('sink').send(chunk),
      (bytes) => hostImport('sink').sendAudio(bytes),
    );
  return {
    info: () => provider.info(),
    complete: (request) => call(() => provider.complete(request)),
    completeStream: (request) => call(() => provider.completeStream(request, hostSink())),
    embed: (request) => call(() => provider.embed(request)),
    countTokens: (request) => call(() => provider.countTokens?.(request) ?? undefined),
    rerank: (request) => call(() => optional('rerank', 'rerank', request)),
    generateImages: (request) =>
      call(() => optional('generateImages', 'image generation', request)),
    transcribe: (request) => call(() => optional('transcribe', 'transcription', request)),
    speak: (request) => call(() => optional('speak', 'speech', request, hostSink())),
  };
}
