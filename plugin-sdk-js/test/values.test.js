import assert from 'node:assert/strict';
import { test } from 'node:test';

import { installHost } from '../src/host.js';
import {
  checkedBaseUrl,
  finishReason,
  messages,
  openAiUsage,
  paramsObject,
  routeSettings,
  secret,
  textOnly,
} from '../src/values.js';

const route = (settings = '') => ({ id: 'r', baseUrl: ' https://api.example.com/v1// ', settings, secrets: [['token', 's3']] });

test('params without the keys the plugin owns', () => {
  assert.deepEqual(paramsObject(''), {});
  assert.deepEqual(paramsObject('{"temperature":0.5,"model":"x"}', ['model']), { temperature: 0.5 });
  assert.throws(() => paramsObject('[1]'), (e) => e.kind === 'invalid-request');
  assert.throws(() => paramsObject('{'), (e) => e.kind === 'invalid-request');
});

test('prompts as messages, text only', () => {
  const [message] = messages({ tag: 'text', val: 'Say hi' });
  assert.equal(message.role, 'user');
  assert.equal(textOnly(message, 'p'), 'Say hi');
  const chat = [
    { role: 'user', parts: [{ tag: 'text', val: 'a' }, { tag: 'reasoning', val: {} }, { tag: 'text', val: 'b' }] },
  ];
  assert.equal(messages({ tag: 'chat', val: chat }), chat);
  assert.equal(textOnly(chat[0], 'p'), 'a\nb');
  const image = { role: 'user', parts: [{ tag: 'image', val: {} }] };
  assert.throws(() => textOnly(image, 'acme'), { message: 'acme does not take image parts' });
});

test('route: base URL, settings, secrets', () => {
  assert.equal(checkedBaseUrl(route(), 'X'), 'https://api.example.com/v1');
  assert.throws(() => checkedBaseUrl({ id: 'r', baseUrl: ' / ' }, 'https://x/v1'), {
    message: 'route `r` has no base_url; set it to https://x/v1',
  });
  assert.deepEqual(routeSettings(route('{"legacy": true}'), { legacy: false, depth: 2 }), {
    legacy: true,
    depth: 2,
  });
  assert.throws(() => routeSettings(route('{"legacy": 1}'), { legacy: false }), {
    message: 'route `r`: setting `legacy`: expected a boolean, got a number',
  });
  assert.throws(() => routeSettings(route('{"legasy": true}'), { legacy: false }), /unknown setting `legasy`/);
  assert.deepEqual(routeSettings(route('{"any": [1]}')), { any: [1] });
  assert.equal(secret(route(), 'token'), 's3');
  assert.equal(secret(route(), 'other'), undefined);
});

test("OpenAI's usage and finish reasons", () => {
  assert.deepEqual(openAiUsage({ prompt_tokens: 9, completion_tokens: 3.0 }), {
    promptTokens: 9,
    completionTokens: 3,
    totalTokens: 12,
  });
  assert.deepEqual(
    openAiUsage({ prompt_tokens: 9, completion_tokens: 3, total_tokens: 13, prompt_tokens_details: { cached_tokens: 4 } }),
    { promptTokens: 9, completionTokens: 3, totalTokens: 13, cachedPromptTokens: 4 },
  );
  assert.equal(openAiUsage(null), undefined);
  assert.deepEqual(finishReason('tool_calls'), { tag: 'tool-calls' });
  assert.deepEqual(finishReason('weird'), { tag: 'other' });
});

test('kv.getOrRefresh declares what it mints secret, once, for its lifetime and a grace', async () => {
  const { kv, SECRET_GRACE_MS } = await import('../src/kv.js');
  const entries = new Map();
  const secrets = [];
  installHost({
    kv: {
      get: (key) => entries.get(key),
      set: (key, value, ttl) => entries.set(key, value),
      delete: (key) => entries.delete(key),
      secret: (value, ttl) => secrets.push([value, ttl]),
    },
  });
  let minted = 0;
  for (let i = 0; i < 3; i += 1) {
    const token = kv.getOrRefresh('t', () => {
      minted += 1;
      return { value: 'ya29.minted', ttlMs: 60_000 };
    });
    assert.equal(token, 'ya29.minted');
  }
  assert.equal(minted, 1);
  assert.deepEqual(secrets, [['ya29.minted', BigInt(60_000 + SECRET_GRACE_MS)]]);
  kv.secret('declared-by-hand', 5);
  assert.deepEqual(secrets.at(-1), ['declared-by-hand', 5n]);
});
