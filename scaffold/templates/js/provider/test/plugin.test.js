// `npm test`: the plugin under Node, without a gateway. The SDK's fake host passes what the
// gateway would and answers the plugin's requests with each test's scripted upstream.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Call, json, message, ndjson } from 'gateway-plugin-sdk/testing';

import * as plugin from '../index.js';

const BASE = 'https://api.example.com/v1';

test('a whole answer: the request sent, the answer read', () => {
  const run = Call.chat('example-model', [message('system', 'Be brief.'), message('user', 'Hello')])
    .baseUrl(BASE)
    .apiKey('sk-test')
    .output(100, 1)
    .complete(plugin, () =>
      json(200, { text: 'Hi!', finish_reason: 'stop', usage: { input_tokens: 5, output_tokens: 2 } }),
    );
  const completion = run.unwrap();
  assert.equal(completion.choices[0].text, 'Hi!');
  assert.deepEqual(completion.choices[0].finishReason, { tag: 'stop' });
  assert.deepEqual(completion.usage, { promptTokens: 5, completionTokens: 2, totalTokens: 7 });

  const [request] = run.sent;
  assert.equal(request.url, `${BASE}/generate`);
  assert.equal(request.headerValue('authorization'), 'Bearer sk-test');
  assert.deepEqual(request.json(), {
    model: 'example-model',
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hello' },
    ],
    stream: false,
    max_tokens: 100,
  });
});

test('a stream: the text as it arrives, and the usage', () => {
  const run = Call.text('example-model', 'Say hello')
    .baseUrl(BASE)
    .stream(plugin, () =>
      ndjson([{ text: 'Hel' }, { text: 'lo' }, { finish_reason: 'stop', usage: { input_tokens: 3, output_tokens: 2 } }]),
    );
  assert.equal(run.streamedText(), 'Hello');
  assert.deepEqual(run.chunks.at(-1).usage, { promptTokens: 3, completionTokens: 2, totalTokens: 5 });
  assert.equal(run.unwrap().choices[0].text, 'Hello');

  const [request] = run.sent;
  assert.equal(request.headerValue('authorization'), undefined, 'no key, no header');
  assert.deepEqual(request.json(), {
    model: 'example-model',
    messages: [{ role: 'user', content: 'Say hello' }],
    stream: true,
  });
});

test('an upstream error keeps its status', () => {
  const run = Call.text('example-model', 'Hello')
    .baseUrl(BASE)
    .complete(plugin, () => json(429, { error: 'slow down' }));
  assert.equal(run.error.tag, 'upstream');
  assert.equal(run.error.val.status, 429);
});
