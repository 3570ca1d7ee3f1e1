import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Answer, Sink, readCompletion, readStream } from '../src/answer.js';
import { ProviderError } from '../src/errors.js';
import { Response } from '../src/http.js';
import { StreamDecoder } from '../src/provider.js';
import { finishReason, usage } from '../src/values.js';

/** `data: text`, `data: usage P C`, `data: stop` (complete), `data: end`. */
class Script extends StreamDecoder {
  body(body, answer) {
    for (const line of body.split('\n')) {
      this.event({ data: line }, answer);
    }
  }

  event(event, answer) {
    const words = event.data.split(' ');
    if (event.data === 'stop') {
      answer.finishReason(0, finishReason('stop'));
      answer.complete();
    } else if (event.data === 'end') {
      answer.end();
    } else if (words[0] === 'usage') {
      answer.usage(usage(Number(words[1]), Number(words[2])));
    } else if (words[0] === 'model') {
      answer.model(words[1]);
    } else if (event.data === 'fail') {
      throw ProviderError.failed('upstream said fail');
    } else {
      answer.text(0, event.data);
    }
  }
}

const sse = (events) =>
  Response.fromChunks(
    200,
    [['content-type', 'text/event-stream']],
    events.map((event) => `data: ${event}\n\n`),
  );

test('streams text and usage after each event', () => {
  const sink = Sink.buffered();
  const events = ['model m-2', 'Hel', 'lo', 'usage 3 2', 'stop', 'end', 'ignored'];
  const completion = readStream(sse(events), sink, 'm-1', new Script());
  assert.equal(completion.model, 'm-2');
  assert.equal(completion.choices[0].text, 'Hello');
  assert.deepEqual(completion.choices[0].finishReason, { tag: 'stop' });
  assert.deepEqual(completion.usage, usage(3, 2));
  assert.deepEqual(
    sink.sent.map((chunk) => [chunk.deltas.map((d) => d.text), chunk.usage?.totalTokens]),
    [[['Hel'], undefined], [['lo'], undefined], [[], 5]],
  );
});

test('a stream cut short is an error, what arrived still sent', () => {
  const sink = Sink.buffered();
  assert.throws(
    () => readStream(sse(['Hi', 'usage 1 1']), sink, 'm', new Script()),
    (error) => error instanceof ProviderError && error.message === 'stream ended early',
  );
  assert.equal(sink.sent.length, 2);
  // Complete, then usage: whole.
  const completion = readStream(sse(['Hi', 'stop', 'usage 1 1']), Sink.buffered(), 'm', new Script());
  assert.deepEqual(completion.usage, usage(1, 1));
});

test('error statuses and decoder errors end the call', () => {
  assert.throws(() => readStream(sse(['Hi', 'fail']), Sink.buffered(), 'm', new Script()), {
    message: 'upstream said fail',
  });
  const limited = Response.fromChunks(
    429,
    [['retry-after', '7']],
    ['{"error":{"message":"slow down"}}'],
  );
  assert.throws(
    () => readCompletion(limited, 'm', new Script()),
    (error) => error.kind === 'upstream' && error.status === 429 && error.retryAfter === 7,
  );
});

test('a JSON answer to a stream request is sent in one chunk', () => {
  const response = Response.fromChunks(200, [['Content-Type', 'application/json']], ['Hel\nlo\nstop']);
  const sink = Sink.buffered();
  const completion = readStream(response, sink, 'm', new Script());
  assert.equal(completion.choices[0].text, 'Hello');
  assert.deepEqual(sink.sent.map((chunk) => chunk.deltas), [[{ index: 0, text: 'Hello' }]]);
});

test('tool-call pieces are sent once each, id and name first', () => {
  const answer = new Answer('m');
  answer.toolCall(0, 0, { id: 'c1', name: 'f' });
  answer.toolCall(0, 0, { arguments: '{"a"' });
  const first = answer.takeUnsent().toolCalls;
  answer.toolCall(0, 0, { id: 'c1', name: 'f', arguments: ':1}' });
  answer.toolCall(0, 1, { name: 'g', arguments: '' });
  answer.toolCall(0, 1, { id: 'c2', arguments: '{}' });
  const second = answer.takeUnsent().toolCalls;
  const seen = (deltas) => deltas.map((d) => [d.call, d.id, d.name, d.arguments]);
  assert.deepEqual(seen(first), [[0, 'c1', 'f', '{"a"']]);
  assert.deepEqual(seen(second), [
    [0, undefined, undefined, ':1}'],
    [1, 'c2', 'g', '{}'],
  ]);
  assert.equal(answer.takeUnsent(), undefined);
  const choice = answer.finish().choices[0];
  assert.equal(choice.toolCalls[0].arguments, '{"a":1}');
  assert.deepEqual(choice.functionCall, { name: 'f', arguments: '{"a":1}' });
});

test('calls without ids get one; reasoning is kept by block', () => {
  const answer = new Answer('m');
  answer.toolCall(1, 0, { id: '', name: 'f', arguments: '{}' });
  answer.reasoning(1, 2, 'b');
  answer.reasoning(1, 0, 'a', { signature: 'S' });
  const choice = answer.finish().choices[0];
  assert.equal(choice.toolCalls[0].id, 'call_1_0');
  assert.deepEqual(
    choice.reasoning.map((block) => [block.text, block.signature]),
    [
      ['a', 'S'],
      ['b', undefined],
    ],
  );
});

test('a sink whose caller left fails every send after', () => {
  let calls = 0;
  const sink = new Sink(() => {
    calls += 1;
    throw new Error('gone');
  });
  assert.throws(() => sink.text(0, 'a'), { message: 'the caller disconnected' });
  assert.throws(() => sink.text(0, 'b'), { message: 'the caller disconnected' });
  assert.equal(calls, 1);
});
