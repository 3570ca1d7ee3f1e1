// The provider under Node, without a gateway: `npm test` (node --test). The SDK's fake host
// (`gateway-plugin-sdk/testing`) passes the requests the gateway would, answers the plugin's HTTP
// requests with the upstream each test scripts, and records them.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Call, json, message, sse } from 'gateway-plugin-sdk/testing';

import * as plugin from '../index.js';

const BASE = 'https://api.example.com/v1';

test('a completion: the request sent, the answer read', () => {
  const run = Call.chat('gpt-x', [message('system', 'Be brief.'), message('user', 'Hello')])
    .baseUrl(BASE)
    .apiKey('sk-test')
    .params({ temperature: 0.2, model: 'ignored' })
    .output(100, 1)
    .complete(plugin, () =>
      json(200, {
        model: 'gpt-x-2024',
        choices: [{ message: { content: 'Hi!' }, finish_reason: 'stop' }],
        usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 },
      }),
    );
  const completion = run.unwrap();
  assert.equal(completion.model, 'gpt-x-2024');
  assert.equal(completion.choices[0].text, 'Hi!');
  assert.deepEqual(completion.choices[0].finishReason, { tag: 'stop' });
  assert.equal(completion.usage.totalTokens, 7);

  assert.equal(run.sent.length, 1);
  const [request] = run.sent;
  assert.equal(request.url, `${BASE}/chat/completions`);
  assert.equal(request.headerValue('authorization'), 'Bearer sk-test');
  assert.deepEqual(request.json(), {
    temperature: 0.2,
    model: 'gpt-x',
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hello' },
    ],
    stream: false,
    max_tokens: 100,
    n: 1,
  });
});

test('a stream: each piece reaches the caller as it arrives', () => {
  const run = Call.text('gpt-x', 'Count to two')
    .baseUrl(BASE)
    .stream(plugin, () =>
      sse([
        { model: 'gpt-x', choices: [{ delta: { content: 'one, ' } }] },
        { model: 'gpt-x', choices: [{ delta: { content: 'two' } }] },
        { model: 'gpt-x', choices: [{ delta: {}, finish_reason: 'stop' }] },
        { model: 'gpt-x', choices: [], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } },
        '[DONE]',
      ]),
    );
  assert.equal(run.unwrap().choices[0].text, 'one, two');
  assert.equal(run.streamedText(0), 'one, two');
  assert.equal(run.sent[0].json().stream_options.include_usage, true);
});

test('an upstream error is the upstream\'s status; a route without a base_url sends nothing', () => {
  const limited = Call.text('gpt-x', 'hi').baseUrl(BASE).complete(plugin, () => json(429, { error: { message: 'slow down' } }));
  assert.equal(limited.error.tag, 'upstream');
  assert.equal(limited.error.val.status, 429);

  const unset = Call.text('gpt-x', 'hi').baseUrl('').complete(plugin, () => assert.fail('no request expected'));
  assert.equal(unset.error.tag, 'failed', 'a route without a base_url is the operator\'s to fix');
  assert.deepEqual(unset.sent, []);
});

test('embeddings, one vector per input', () => {
  const run = Call.embedding('embed-x', ['a', 'bc'])
    .baseUrl(BASE)
    .embed(plugin, (request) =>
      json(200, {
        model: 'embed-x',
        data: request.json().input.map((text, index) => ({ index, embedding: [text.length, 0.5] })),
        usage: { prompt_tokens: 3, total_tokens: 3 },
      }),
    );
  assert.deepEqual(run.unwrap().vectors, [Float32Array.of(1, 0.5), Float32Array.of(2, 0.5)]);
});
