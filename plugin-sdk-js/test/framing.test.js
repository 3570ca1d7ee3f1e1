// Stream framings beside SSE: newline-delimited JSON and AWS event streams, parsed in every split
// and read through the drivers (as the Rust and Python SDKs' tests).

import assert from 'node:assert/strict';
import { test } from 'node:test';

import * as sdk from '../src/index.js';
import { FRAMINGS, Sink, readStream } from '../src/answer.js';
import { ProviderError } from '../src/errors.js';
import {
  EventStreamParser,
  FrameError,
  MAX_FRAME_LEN,
  Message,
  crc32,
  encodeEventStream as encode,
} from '../src/eventstream.js';
import { concatBytes } from '../src/bytes.js';
import { Response } from '../src/http.js';
import { NdjsonParser } from '../src/ndjson.js';
import { HttpProvider, StreamDecoder } from '../src/provider.js';
import { finishReason, usage } from '../src/values.js';

const encoder = new TextEncoder();

function pieces(body, size) {
  const out = [];
  for (let at = 0; at < body.length; at += size) {
    out.push(body.subarray(at, at + size));
  }
  return out;
}

/** Every way of cutting `body` in two, and in pieces of every size. */
function* splits(body) {
  for (let at = 0; at <= body.length; at += 1) {
    yield [body.subarray(0, at), body.subarray(at)];
  }
  for (let size = 1; size <= body.length; size += 1) {
    yield pieces(body, size);
  }
}

function response(chunks, contentType) {
  const headers = contentType === undefined ? [] : [['Content-Type', contentType]];
  // Copies: `fromChunks` hands the array itself to the body, which consumes it.
  return Response.fromChunks(200, headers, [...chunks]);
}

/** Ollama-like NDJSON lines: `{"t": text}`, then `{"done": true, "usage": [P, C]}`. */
class Ollama extends StreamDecoder {
  body(body, answer) {
    const line = JSON.parse(body);
    if ('t' in line) {
      answer.text(0, line.t);
    }
    if (line.done) {
      answer.usage(usage(...line.usage));
      answer.finishReason(0, finishReason('stop'));
      answer.complete();
    }
  }
}

const sent = (sink) => sink.sent.map((c) => [(c.deltas ?? []).map((d) => d.text), c.usage?.totalTokens]);

const NDJSON = encoder.encode(
  '\ufeff{"t":"Hé"}\r\n' +
    '\n' +
    '   {"t":"llo"}  \n' +
    '\r\n' +
    ' \t \n' +
    '{"t":" wörld"}\n' +
    '{"done":true,"usage":[3,2]}',
);

function parseLines(chunks) {
  const parser = new NdjsonParser();
  const events = chunks.flatMap((chunk) => parser.push(chunk));
  const last = parser.finish();
  return last ? [...events, last] : events;
}

test('NDJSON: every split gives the same lines', () => {
  const expected = [
    { data: '{"t":"Hé"}' },
    { data: '{"t":"llo"}' },
    { data: '{"t":" wörld"}' },
    { data: '{"done":true,"usage":[3,2]}' },
  ];
  for (const chunks of splits(NDJSON)) {
    assert.deepEqual(parseLines(chunks), expected, `${chunks.map((c) => c.length)}`);
  }
});

test('NDJSON: lines end at LF only; a leading BOM is removed', () => {
  const bytes = (text) => encoder.encode(text);
  assert.deepEqual(parseLines([bytes('a\rb\r'), bytes('\nc')]), [{ data: 'a\rb' }, { data: 'c' }]);
  assert.deepEqual(parseLines([new Uint8Array(0)]), []);
  assert.deepEqual(parseLines([bytes('\n\n \r\n')]), []);
  assert.deepEqual(parseLines([Uint8Array.of(0xef), Uint8Array.of(0xbb), Uint8Array.of(0xbf, 0x31, 10)]), [
    { data: '1' },
  ]);
});

test('NDJSON streams: every split reads the same answer, line by line to the sink', () => {
  for (const chunks of splits(NDJSON)) {
    const sink = Sink.buffered();
    const completion = readStream(response(chunks, 'application/x-ndjson; charset=utf-8'), sink, 'm', new Ollama());
    assert.equal(completion.choices[0].text, 'Héllo wörld');
    assert.deepEqual(completion.usage, usage(3, 2));
    assert.deepEqual(completion.choices[0].finishReason, { tag: 'stop' });
    assert.deepEqual(sent(sink), [[['Hé'], undefined], [['llo'], undefined], [[' wörld'], undefined], [[], 5]]);
  }
});

test('NDJSON: auto-detected under every NDJSON type', () => {
  for (const type of [
    'application/x-ndjson',
    'Application/NDJSON',
    'application/jsonl; charset=utf-8',
    ' application/x-jsonlines ;q=1',
    'application/jsonlines',
  ]) {
    const completion = readStream(response([NDJSON], type), Sink.buffered(), 'm', new Ollama());
    assert.equal(completion.choices[0].text, 'Héllo wörld', type);
  }
});

test('NDJSON: [DONE] ends, read by the default event', () => {
  const body = encoder.encode('{"t":"a"}\n{"t":"b"}\n[DONE]\nnot json\n');
  const sink = Sink.buffered();
  const completion = readStream(response([body], 'application/x-ndjson'), sink, 'm', new Ollama());
  assert.equal(completion.choices[0].text, 'ab');
  assert.deepEqual(sent(sink), [[['a'], undefined], [['b'], undefined]]);
});

test('NDJSON: a stream cut short is an error, what arrived still sent', () => {
  const sink = Sink.buffered();
  assert.throws(
    () => readStream(response([encoder.encode('{"t":"a"}\n{"t":"b"}')], 'application/x-ndjson'), sink, 'm', new Ollama()),
    (error) => error instanceof ProviderError && error.message === 'stream ended early',
  );
  assert.deepEqual(sent(sink), [[['a'], undefined], [['b'], undefined]]);
});

test('a forced framing wins over a misleading Content-Type', () => {
  const body = encoder.encode('{"t":"a"}\n{"t":"b"}\n{"done":true,"usage":[1,1]}\n');
  for (const type of ['application/json', 'text/plain', 'text/event-stream', undefined]) {
    const sink = Sink.buffered();
    const completion = readStream(response(pieces(body, 5), type), sink, 'm', new Ollama(), 'ndjson');
    assert.equal(completion.choices[0].text, 'ab', type);
    assert.equal(sink.sent.length, 3, type);
  }
  // Unforced, the same body labelled JSON is one whole answer, which is not JSON.
  assert.throws(() => readStream(response([body], 'application/json'), Sink.buffered(), 'm', new Ollama()), SyntaxError);
  // Forced SSE under an NDJSON type.
  const events = encoder.encode('data: {"t":"a"}\n\ndata: {"done":true,"usage":[1,1]}\n\n');
  const completion = readStream(response([events], 'application/x-ndjson'), Sink.buffered(), 'm', new Ollama(), 'sse');
  assert.equal(completion.choices[0].text, 'a');
});

test('JSON answers to a stream request stay one chunk; JSON is the media type itself', () => {
  assert.equal(response([], 'application/jsonl').isJson(), false);
  for (const type of ['application/json', 'Application/JSON; charset=utf-8']) {
    const sink = Sink.buffered();
    const chunks = [encoder.encode('{"t":"ab",'), encoder.encode('"done":true,"usage":[1,1]}')];
    const completion = readStream(response(chunks, type), sink, 'm', new Ollama());
    assert.equal(completion.choices[0].text, 'ab');
    assert.deepEqual(sent(sink), [[['ab'], 2]]);
  }
});

test('an unknown framing is the plugin\'s bug', () => {
  assert.deepEqual([...FRAMINGS], ['auto', 'sse', 'ndjson', 'eventstream']);
  assert.throws(() => readStream(response([], undefined), Sink.buffered(), 'm', new Ollama(), 'jsonl'), TypeError);
});

// ---------------------------------------------------------------------------- event streams

const frame = (eventType, payload) =>
  encode(
    [
      [':event-type', eventType],
      [':content-type', 'application/json'],
      [':message-type', 'event'],
    ],
    payload,
  );

const exception = (kind, message) =>
  encode(
    [
      [':exception-type', kind],
      [':content-type', 'application/json'],
      [':message-type', 'exception'],
    ],
    JSON.stringify({ message }),
  );

/** Bedrock-like messages: `delta` text, `stop` completes, `metadata` usage; else the default. */
class Bedrock extends StreamDecoder {
  bodies = [];

  body(body, answer) {
    this.bodies.push(body);
  }

  message(message, answer) {
    const payload = message.payload.length > 0 ? JSON.parse(message.text()) : undefined;
    if (message.eventType === 'delta') {
      answer.text(0, payload.t);
    } else if (message.eventType === 'stop') {
      answer.finishReason(0, finishReason('stop'));
      answer.complete();
    } else if (message.eventType === 'metadata') {
      answer.usage(usage(...payload.usage));
    } else {
      super.message(message, answer);
    }
  }
}

const STREAM = [
  frame('messageStart', '{"role":"assistant"}'),
  frame('delta', '{"t":"Hé"}'),
  frame('delta', '{"t":"llo"}'),
  frame('stop', '{}'),
  frame('metadata', '{"usage":[3,2]}'),
];

/** Every message and the error's text (`undefined` when the stream ended well). */
function parse(chunks) {
  const parser = new EventStreamParser();
  const messages = [];
  try {
    for (const chunk of chunks) {
      messages.push(...parser.push(chunk));
    }
    parser.finish();
  } catch (error) {
    assert.ok(error instanceof FrameError, error);
    return [messages, error.message];
  }
  return [messages, undefined];
}

function errorOf(bytes) {
  const [messages, error] = parse([bytes]);
  assert.notEqual(error, undefined, `${messages.length} messages`);
  return error;
}

function prelude(total, headers) {
  const head = new Uint8Array(12);
  const view = new DataView(head.buffer);
  view.setUint32(0, total);
  view.setUint32(4, headers);
  view.setUint32(8, crc32(head.subarray(0, 8)));
  return head;
}

/** Both checksums of a one-frame `bytes` made right after its bytes were changed. */
function resign(bytes) {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  view.setUint32(8, crc32(bytes.subarray(0, 8)));
  view.setUint32(bytes.length - 4, crc32(bytes.subarray(0, bytes.length - 4)));
  return bytes;
}

test('crc32 is IEEE', () => {
  assert.equal(crc32(encoder.encode('123456789')), 0xcbf43926);
  assert.equal(crc32(new Uint8Array(0)), 0);
});

test('event stream: known frames', () => {
  const bare = encode([], '{"foo": "bar"}');
  assert.deepEqual([...bare.subarray(0, 12)], [0, 0, 0, 30, 0, 0, 0, 0, 186, 242, 246, 138]);
  assert.deepEqual([...bare.subarray(26)], [174, 114, 88, 228]);
  const typed = encode([['content-type', 'application/json']], '{"foo": "bar"}');
  assert.deepEqual([...typed.subarray(0, 12)], [0, 0, 0, 62, 0, 0, 0, 32, 64, 93, 249, 70]);
  assert.deepEqual([...typed.subarray(58)], [111, 162, 191, 59]);
  assert.equal(encode([]).length, 16);
});

test('event stream: every header type round-trips', () => {
  const headers = [
    ['true', true, 0],
    ['false', false, 1],
    ['byte', -7, 2],
    ['short', -300, 3],
    ['int', -70000, 4],
    ['long', -(2n ** 63n) + 1n, 5],
    ['bytes', Uint8Array.of(0, 255, 1), 6],
    ['string', 'héllo', 7],
    ['timestamp', 1764201600000n, 8],
    ['uuid', encoder.encode('0123456789abcdef'), 9],
    ['empty', '', 7],
  ];
  const [messages, error] = parse([encode(headers, '{}')]);
  assert.equal(error, undefined);
  assert.deepEqual(messages, [new Message(headers.map(([n, v]) => [n, v]), encoder.encode('{}'))]);
  // Typed by their values: boolean, number (an int), bigint (a long), bytes, string.
  const told = headers.filter(([, , type]) => [0, 1, 4, 5, 6, 7].includes(type));
  assert.deepEqual(encode(told.map(([n, v]) => [n, v])), encode(told));
});

test('event stream: every split gives the same messages', () => {
  const bytes = concatBytes(STREAM);
  const whole = parse([bytes]);
  assert.equal(whole[0].length, 5);
  assert.equal(whole[1], undefined);
  for (const chunks of splits(bytes)) {
    assert.deepEqual(parse(chunks), whole);
  }
});

test('event stream: headers by exact name; exceptions and errors', () => {
  const m = new Message([[':event-type', 'messageStart'], [':event-type', 'ignored'], ['n', 1]]);
  assert.equal(m.eventType, 'messageStart');
  assert.equal(m.stringHeader(':Event-Type'), undefined);
  assert.equal(m.header('n'), 1);
  assert.equal(m.stringHeader('n'), undefined);
  assert.equal(m.exception(), undefined);

  const throttled = new Message(
    [[':message-type', 'exception'], [':exception-type', 'throttlingException']],
    encoder.encode('{"message":"Too many requests"}'),
  );
  assert.equal(throttled.exception().kind, 'throttlingException');
  assert.equal(String(throttled.exception()), 'throttlingException: Too many requests');
  const capital = new Message([[':message-type', 'exception']], encoder.encode('{"Message":"Big"}'));
  assert.equal(String(capital.exception()), 'exception: Big');
  const error = new Message([
    [':message-type', 'error'],
    [':error-code', 'InternalFailure'],
    [':error-message', 'broke'],
  ]);
  assert.equal(String(error.exception()), 'InternalFailure: broke');
  const bare = new Message([[':message-type', 'exception']], encoder.encode('é'.repeat(1000))).exception();
  assert.deepEqual([bare.kind, Array.from(bare.message).length], ['exception', 300]);
  assert.equal(String(new Message([[':message-type', 'error']]).exception()), 'error');
  assert.equal(new Message([[':message-type', 'event']], encoder.encode('{}')).exception(), undefined);
});

test('event stream: bad checksums', () => {
  const bytes = encode([[':event-type', 'messageStop']], '{}');
  const damaged = (at, flip) => {
    const copy = bytes.slice();
    copy[at < 0 ? copy.length + at : at] ^= flip;
    return copy;
  };
  assert.match(errorOf(damaged(9, 0x10)), /^prelude checksum mismatch \(the frame says [0-9a-f]{8}, its bytes give [0-9a-f]{8}\)$/);
  assert.match(errorOf(damaged(-6, 0x10)), /^message checksum mismatch/);
  // A damaged length is caught by the prelude's checksum, not trusted.
  const length = bytes.slice();
  length[3] = 0xff;
  assert.match(errorOf(length), /^prelude checksum mismatch/);
});

test('event stream: lengths that do not fit', () => {
  assert.equal(errorOf(prelude(15, 0)), 'frame length 15 is below the 16-byte minimum');
  const bytes = encode([], 'abcd');
  new DataView(bytes.buffer).setUint32(4, 5);
  assert.equal(errorOf(resign(bytes)), 'headers length 5 does not fit in a frame of 20 bytes');
  const header = encode([['s', 'abc']]);
  new DataView(header.buffer).setUint32(4, 6);
  assert.match(errorOf(resign(header)), /runs past the end of the headers/);
});

test('event stream: oversized frames fail before they are buffered', () => {
  const parser = new EventStreamParser();
  let first;
  assert.throws(
    () => parser.push(prelude(MAX_FRAME_LEN + 1, 0)),
    (error) => {
      first = error;
      return error.message.includes('over the 16777216-byte limit');
    },
  );
  // Failed for good, and nothing kept.
  assert.equal(parser.pendingLength, 0);
  assert.throws(() => parser.push(encoder.encode('more')), (error) => error === first);
  assert.throws(() => parser.finish(), (error) => error === first);
  // The limit itself is allowed (only the prelude arrives here).
  assert.deepEqual(new EventStreamParser().push(prelude(MAX_FRAME_LEN, 0)), []);
});

test('event stream: unknown types and bad text', () => {
  const bytes = encode([['h', true]]);
  bytes[14] = 10;
  assert.equal(errorOf(resign(bytes)), 'header "h" has unknown value type 10');
  const text = encode([['h', 'ab']]);
  text[17] = 0xff;
  assert.equal(errorOf(resign(text)), 'header "h" is a string but not UTF-8');
  const name = encode([['h', true]]);
  name[13] = 0xc3;
  assert.equal(errorOf(resign(name)), 'a header name is not UTF-8');
  // Bytes need not be UTF-8.
  assert.equal(parse([encode([['h', Uint8Array.of(0xff)]])])[1], undefined);
});

test('event stream: a stream cut short', () => {
  const bytes = encode([[':event-type', 'messageStop']], '{}');
  assert.equal(parse([bytes.subarray(0, 5)])[1], 'the stream ended inside a frame: 5 bytes of at least 16 arrived');
  const cut = bytes.subarray(0, bytes.length - 1);
  assert.equal(
    parse([cut])[1],
    `the stream ended inside a frame: ${cut.length} bytes of ${bytes.length} arrived`,
  );
  assert.deepEqual(parse(pieces(cut, 3)), parse([cut]));
  assert.deepEqual(parse([]), [[], undefined]);
});

test('event stream: messages before a fault are kept', () => {
  const good = encode([], '1');
  const bad = encode([], '2');
  bad[13] ^= 1;
  const parser = new EventStreamParser();
  assert.equal(parser.push(concatBytes([good, bad, good])).length, 1);
  assert.throws(() => parser.push(new Uint8Array(0)), /^FrameError: message checksum mismatch/);
});

test('event stream: any damaged byte is an error in every split', () => {
  const bytes = concatBytes(STREAM.slice(0, 2));
  for (let at = 0; at < bytes.length; at += 1) {
    const damaged = bytes.slice();
    damaged[at] ^= 0x41;
    const whole = parse([damaged]);
    assert.notEqual(whole[1], undefined, `byte ${at}`);
    for (const size of [1, 3, 7, 40]) {
      assert.deepEqual(parse(pieces(damaged, size)), whole, `byte ${at}, pieces of ${size}`);
    }
  }
});

const aws = (chunks, type = 'application/vnd.amazon.eventstream') => response(chunks, type);

test('event streams: every split reads the same answer, message by message to the sink', () => {
  for (const chunks of splits(concatBytes(STREAM))) {
    const sink = Sink.buffered();
    const decoder = new Bedrock();
    const completion = readStream(aws(chunks, 'Application/vnd.amazon.eventstream; x=1'), sink, 'm', decoder);
    assert.equal(completion.choices[0].text, 'Héllo');
    assert.deepEqual(completion.usage, usage(3, 2));
    assert.deepEqual(sent(sink), [[['Hé'], undefined], [['llo'], undefined], [[], 5]]);
    // The default `message` read `messageStart` with `body`, as text.
    assert.deepEqual(decoder.bodies, ['{"role":"assistant"}']);
  }
});

test('event streams: forced over a misleading Content-Type', () => {
  for (const type of ['application/octet-stream', 'application/json', 'text/event-stream', undefined]) {
    const completion = readStream(aws(pieces(concatBytes(STREAM), 9), type), Sink.buffered(), 'm', new Bedrock(), 'eventstream');
    assert.equal(completion.choices[0].text, 'Héllo', type);
  }
});

test('event streams: an exception fails the call', () => {
  const body = concatBytes([frame('delta', '{"t":"Hel"}'), exception('modelStreamErrorException', 'the model broke'), STREAM[3]]);
  const sink = Sink.buffered();
  assert.throws(
    () => readStream(aws([body]), sink, 'm', new Bedrock()),
    (error) =>
      error instanceof ProviderError &&
      error.kind === 'failed' &&
      error.message === 'modelStreamErrorException: the model broke',
  );
  assert.deepEqual(sent(sink), [[['Hel'], undefined]]);
});

test('event streams: damaged frames fail the call, the frames before them sent', () => {
  const first = frame('delta', '{"t":"Hel"}');
  for (const [at, says] of [
    [9, 'prelude checksum mismatch'],
    [-1, 'message checksum mismatch'],
  ]) {
    const damaged = frame('delta', '{"t":"lo"}');
    damaged[at < 0 ? damaged.length + at : at] ^= 0x40;
    const body = concatBytes([first, damaged, STREAM[3]]);
    for (const chunks of splits(body)) {
      const sink = Sink.buffered();
      assert.throws(
        () => readStream(aws(chunks), sink, 'm', new Bedrock()),
        (error) =>
          error instanceof ProviderError &&
          error.kind === 'failed' &&
          error.message.startsWith(`malformed response from upstream: invalid event stream: ${says}`),
      );
      assert.deepEqual(sent(sink), [[['Hel'], undefined]]);
    }
  }
});

test('event streams: a frame cut in the middle', () => {
  assert.throws(
    () => readStream(aws([concatBytes(STREAM.slice(0, 4)), STREAM[4].subarray(0, 10)]), Sink.buffered(), 'm', new Bedrock()),
    {
      message:
        'malformed response from upstream: invalid event stream: the stream ended inside a frame: 10 bytes of at least 16 arrived',
    },
  );
  // Whole frames without the one that completes: cut off.
  assert.throws(() => readStream(aws([concatBytes(STREAM.slice(0, 3))]), Sink.buffered(), 'm', new Bedrock()), {
    message: 'stream ended early',
  });
});

test('an HttpProvider names its framing; the SDK exports the new names', () => {
  assert.equal(HttpProvider.FRAMING, 'auto');
  for (const name of ['FRAMINGS', 'Message', 'MessageException', 'FrameError', 'EventStreamParser', 'NdjsonParser', 'encodeEventStream']) {
    assert.ok(sdk[name], name);
  }

  class Ndjsonic extends HttpProvider {
    static FRAMING = 'ndjson';

    request() {
      const body = encoder.encode('{"t":"a"}\n{"t":"b"}\n{"done":true,"usage":[2,1]}\n');
      return { send: () => response(pieces(body, 4), 'application/json') };
    }

    body(body, answer) {
      new Ollama().body(body, answer);
    }

    checkedRequest(call, stream) {
      return this.request(call, stream);
    }
  }
  const sink = Sink.buffered();
  const completion = new Ndjsonic().completeStream({ model: 'm' }, sink);
  assert.equal(completion.choices[0].text, 'ab');
  assert.deepEqual(sent(sink), [[['a'], undefined], [['b'], undefined], [[], 3]]);
});
