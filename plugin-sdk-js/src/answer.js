// Reading a provider's answer, whole or streamed, into the gateway's completion. A plugin
// describes only its wire format (a decoder: one answer, or one stream event, into an `Answer`);
// `readCompletion` and `readStream` own the rest: the status check and the mapping of error
// answers, the event loop, sending new text and usage to the caller as they arrive, and telling a
// complete answer from one cut short.

import { ProviderError } from './errors.js';

const OPEN = 0;
/** The upstream said the answer is whole; events may still follow. */
const COMPLETE = 1;
/** The end marker arrived: stop reading. */
const ENDED = 2;

/**
 * The answer being read: the completion so far, and what the caller has not been sent yet.
 * Streamed text, tool-call pieces, reasoning and usage given to it reach the caller after each
 * event (by `readStream`); everything reaches the final completion.
 */
export class Answer {
  /** An empty answer to a request for `requestedModel` (reported unless `model()` names another). */
  constructor(requestedModel) {
    this.modelName = requestedModel;
    /** @type {Map<number, any>} choices by index */
    this.choices = new Map();
    this.usageSoFar = undefined;
    this.usageUnsent = false;
    this.unsent = { deltas: [], reasoning: [], toolCalls: [] };
    this.progress = OPEN;
  }

  choice(index) {
    let choice = this.choices.get(index);
    if (!choice) {
      choice = { text: '', reasoning: new Map(), toolCalls: new Map() };
      this.choices.set(index, choice);
    }
    return choice;
  }

  /** The model the upstream says answered; an empty name is ignored, the last one wins. */
  model(name) {
    if (typeof name === 'string' && name !== '') {
      this.modelName = name;
    }
  }

  /**
   * Appends `text` to choice `choice` and queues it for the caller. Empty text sends nothing but
   * makes the choice part of the answer.
   */
  text(choice, text) {
    this.choice(choice).text += text;
    if (text === '') {
      return;
    }
    const last = this.unsent.deltas.at(-1);
    if (last && last.index === choice) {
      last.text += text;
    } else {
      this.unsent.deltas.push({ index: choice, text });
    }
  }

  /**
   * Adds a piece of tool call `call` of choice `choice`: `id` and `name` count once (the first
   * non-empty value), `args` pieces are appended. A call still without an id at the end gets
   * `call_{choice}_{call}`. The caller sees the id and name once and the arguments as they come.
   *
   * @param {number} choice
   * @param {number} call
   * @param {{id?: string, name?: string, arguments?: string}} piece
   */
  toolCall(choice, call, { id, name, arguments: args = '' }) {
    const calls = this.choice(choice).toolCalls;
    let partial = calls.get(call);
    if (!partial) {
      partial = { id: '', name: '', arguments: '' };
      calls.set(call, partial);
    }
    // The first non-empty id and name count, and are sent once.
    const newId = id && partial.id === '' ? id : undefined;
    const newName = name && partial.name === '' ? name : undefined;
    partial.id ||= newId ?? '';
    partial.name ||= newName ?? '';
    partial.arguments += args;
    if (newId === undefined && newName === undefined && args === '') {
      return;
    }
    const last = this.unsent.toolCalls.at(-1);
    if (last && last.index === choice && last.call === call) {
      // Another piece of the call just queued: one delta, as for text.
      last.id ??= newId;
      last.name ??= newName;
      last.arguments += args;
    } else {
      this.unsent.toolCalls.push({ index: choice, call, id: newId, name: newName, arguments: args });
    }
  }

  /** Adds a piece of the legacy single function call of choice `choice`. */
  functionCall(choice, { name, arguments: args = '' }) {
    const partial = this.choice(choice);
    partial.functionCall ??= { name: '', arguments: '' };
    partial.functionCall.name ||= name ?? '';
    partial.functionCall.arguments += args;
  }

  /**
   * Appends `text` to reasoning block `block` of choice `choice` (blocks are kept in the order of
   * their numbers, before the choice's text) and queues it for the caller. `signature` and
   * `redacted` (reasoning the provider does not show, as opaque text) replace the block's.
   */
  reasoning(choice, block, text, { signature, redacted } = {}) {
    const blocks = this.choice(choice).reasoning;
    let kept = blocks.get(block);
    if (!kept) {
      kept = { text: '', signature: undefined, redacted: undefined };
      blocks.set(block, kept);
    }
    kept.text += text;
    kept.signature = signature ?? kept.signature;
    kept.redacted = redacted ?? kept.redacted;
    if (text === '' && signature === undefined && redacted === undefined) {
      return;
    }
    const last = this.unsent.reasoning.at(-1);
    if (last && last.index === choice && last.block === block && !last.signature && !last.redacted) {
      last.text += text;
      last.signature = signature;
      last.redacted = redacted;
    } else {
      this.unsent.reasoning.push({ index: choice, block, text, signature, redacted });
    }
  }

  /** Sets why choice `choice` ended (the WIT's `finish-reason`, see `finishReason()`). */
  finishReason(choice, reason) {
    this.choice(choice).finishReason = reason;
  }

  /** Sets the provider's logprobs object of choice `choice` (JSON-able; the last one wins). */
  logprobs(choice, logprobs) {
    if (logprobs !== undefined && logprobs !== null) {
      this.choice(choice).logprobs = JSON.stringify(logprobs);
    }
  }

  /**
   * Sets the usage so far (the last value wins: providers report totals) and queues it for the
   * gateway, so that a stream cut short is still recorded with what it used.
   */
  usage(usage) {
    if (usage) {
      this.usageSoFar = usage;
      this.usageUnsent = true;
    }
  }

  /** The upstream said the answer is whole; later events are still read (usage may follow). */
  complete() {
    this.progress = Math.max(this.progress, COMPLETE);
  }

  /** The upstream's end marker: the answer is whole and no more events are read. */
  end() {
    this.progress = ENDED;
  }

  /** Whether `complete()` or `end()` was called. */
  isComplete() {
    return this.progress >= COMPLETE;
  }

  /** Whether `end()` was called. */
  isEnded() {
    return this.progress === ENDED;
  }

  /** What the caller has not been sent yet, as a chunk, if anything. */
  takeUnsent() {
    const usage = this.usageUnsent ? this.usageSoFar : undefined;
    this.usageUnsent = false;
    const { deltas, reasoning, toolCalls } = this.unsent;
    if (deltas.length === 0 && reasoning.length === 0 && toolCalls.length === 0 && !usage) {
      return undefined;
    }
    this.unsent = { deltas: [], reasoning: [], toolCalls: [] };
    return { deltas, reasoning, toolCalls, usage };
  }

  /**
   * The completion: choices by index, tool calls by position (without an id given
   * `call_{choice}_{position}`), and `functionCall` mirroring the first tool call (Commonbase
   * clients read it).
   */
  finish() {
    const byKey = (a, b) => a[0] - b[0];
    const choices = [...this.choices.entries()].sort(byKey).map(([index, choice]) => {
      const toolCalls = [...choice.toolCalls.entries()].sort(byKey).map(([, call], position) => ({
        id: call.id || `call_${index}_${position}`,
        name: call.name,
        arguments: call.arguments,
      }));
      const first = toolCalls[0];
      return {
        index,
        text: choice.text,
        reasoning: [...choice.reasoning.entries()].sort(byKey).map(([, block]) => block),
        finishReason: choice.finishReason,
        functionCall:
          choice.functionCall ?? (first ? { name: first.name, arguments: first.arguments } : undefined),
        toolCalls,
        logprobs: choice.logprobs,
      };
    });
    return { model: this.modelName, choices, usage: this.usageSoFar };
  }
}

/**
 * Partial results of a streamed completion (`completeStream`), and the audio of a speech
 * (`speak`), delivered to the caller as they arrive: through the host's `sink` import, or kept in
 * memory (`Sink.buffered()`, for tests).
 */
export class Sink {
  /**
   * @param {(chunk: object) => void} send the host's `sink.send`
   * @param {(bytes: Uint8Array) => void} [sendAudio] the host's `sink.send-audio`
   */
  constructor(send, sendAudio = undefined) {
    this.sendChunk = send;
    this.sendBytes = sendAudio;
    this.closed = false;
    /** @type {object[]} what a buffered sink received */
    this.sent = [];
    /** @type {Uint8Array[]} the audio a buffered sink received (`sendAudio`), piece by piece */
    this.audio = [];
  }

  /** A sink that keeps every chunk in `sent` (and the audio in `audio`) instead of sending it. */
  static buffered() {
    const sink = new Sink(
      (chunk) => {
        sink.sent.push(chunk);
      },
      (bytes) => {
        sink.audio.push(bytes.slice());
      },
    );
    return sink;
  }

  /**
   * Sends a chunk (`{deltas, reasoning, toolCalls, usage}`) to the caller. Throws
   * `failed('the caller disconnected')` when the caller is gone: stop working.
   */
  send(chunk) {
    if (!this.closed) {
      try {
        this.sendChunk({ deltas: [], reasoning: [], toolCalls: [], ...chunk });
        return;
      } catch {
        this.closed = true;
      }
    }
    throw ProviderError.failed('the caller disconnected');
  }

  /** Sends new text for choice `index` (nothing for empty text). */
  text(index, text) {
    if (text !== '') {
      this.send({ deltas: [{ index, text }] });
    }
  }

  /**
   * Sends the next bytes of a speech's audio (`speak`) to the caller, as the upstream sends them
   * (a `Uint8Array`, or an `ArrayBuffer`; nothing for no bytes). Throws
   * `failed('the caller disconnected')` when the caller is gone: stop working.
   */
  sendAudio(bytes) {
    const piece = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes);
    if (piece.length === 0) {
      return;
    }
    if (!this.sendBytes) {
      throw new TypeError('this sink takes no audio: new Sink(send, sendAudio)');
    }
    if (!this.closed) {
      try {
        this.sendBytes(piece);
        return;
      } catch {
        this.closed = true;
      }
    }
    throw ProviderError.failed('the caller disconnected');
  }
}

/**
 * Reads a non-streamed answer with `decoder` (its `body(text, answer)`). A non-2xx status is
 * `ProviderError.upstream` with the provider's message.
 */
export function readCompletion(response, requestedModel, decoder) {
  const whole = response.errorForStatus();
  const answer = new Answer(requestedModel);
  decoder.body(whole.text(), answer);
  decoder.end?.(answer);
  return answer.finish();
}

/** The stream framings `readStream` takes (see there). */
export const FRAMINGS = Object.freeze(['auto', 'sse', 'ndjson', 'eventstream']);

/**
 * Reads a streamed answer with `decoder`, sending new text, tool-call pieces, reasoning and usage
 * through `sink` after each event. The stream must reach `answer.complete()` (or `end()`) before
 * the body ends: otherwise it was cut off, and the call fails with `stream ended early`.
 *
 * `framing` says how the body is cut into events: `'sse'` Server-Sent Events (`decoder.event`),
 * `'ndjson'` one JSON value a line (`decoder.event`, the event's `data` the line),
 * `'eventstream'` AWS event-stream messages (`decoder.message`; a malformed frame is `failed`);
 * whatever the body's `Content-Type`. `'auto'` (the default) goes by `Content-Type`: an AWS event
 * stream (`application/vnd.amazon.eventstream`), NDJSON (`application/x-ndjson`,
 * `application/jsonl`, ...: `Response.isNdjson()`), JSON (a server that ignored the request to
 * stream: read whole with `body` and its text sent in one chunk), anything else SSE.
 */
export function readStream(response, sink, requestedModel, decoder, framing = 'auto') {
  if (!FRAMINGS.includes(framing)) {
    throw new TypeError(`unknown stream framing ${JSON.stringify(framing)} (known: ${FRAMINGS.join(', ')})`);
  }
  const streamed = response.errorForStatus();
  const answer = new Answer(requestedModel);
  const how = streamFraming(streamed, framing);
  if (how === 'json') {
    decoder.body(streamed.text(), answer);
    sendUnsent(answer, sink);
  } else if (how === 'eventstream') {
    readEvents(streamed, streamed.eventStream(), answer, sink, (m) => decoder.message(m, answer));
  } else if (how === 'ndjson') {
    readEvents(streamed, streamed.ndjson(), answer, sink, (e) => decoder.event(e, answer));
  } else {
    readEvents(streamed, streamed.sse(), answer, sink, (e) => decoder.event(e, answer));
  }
  if (!answer.isComplete()) {
    throw ProviderError.failed('stream ended early');
  }
  decoder.end?.(answer);
  return answer.finish();
}

/** How `readStream` reads `response`: `'json'` (whole), `'sse'`, `'ndjson'` or `'eventstream'`. */
function streamFraming(response, framing) {
  if (framing !== 'auto') {
    return framing;
  }
  if (response.isEventStream()) {
    return 'eventstream';
  }
  if (response.isNdjson()) {
    return 'ndjson';
  }
  return response.isJson() ? 'json' : 'sse';
}

/** The event loop, whatever the framing: `read` each event, send what it added, stop at the end. */
function readEvents(response, events, answer, sink, read) {
  for (const event of events) {
    read(event);
    sendUnsent(answer, sink);
    if (answer.isEnded()) {
      response.close();
      break;
    }
  }
}

function sendUnsent(answer, sink) {
  const chunk = answer.takeUnsent();
  if (chunk) {
    sink.send(chunk);
  }
}
