import assert from 'node:assert/strict';
import { test } from 'node:test';

import { checkOutput } from '../src/provider.js';

const fields = { maxTokens: [['max_completion_tokens'], ['generationConfig', 'maxOutputTokens']], choices: [['n']] };
const bytes = (value) => new TextEncoder().encode(typeof value === 'string' ? value : JSON.stringify(value));
const check = (maxTokens, body, choices = 1, f = fields) => checkOutput({ maxTokens, choices }, f, bytes(body));
const refused = (...args) =>
  assert.throws(
    () => check(...args),
    (e) => e.kind === 'failed',
  );

test('a body within the output limit passes', () => {
  check(50, { max_completion_tokens: 50 });
  check(50, { generationConfig: { maxOutputTokens: 10 }, n: 2 }, 2);
  check(undefined, { n: 9 });
  check(undefined, 'not json', 1, undefined);
});

test('a body over the output limit, or unbounded, is refused', () => {
  assert.throws(
    () => check(50, { max_completion_tokens: 51 }),
    (e) => e.kind === 'failed' && e.message.includes('max_completion_tokens = 51'),
  );
  refused(50, { generationConfig: { maxOutputTokens: 500 }, max_completion_tokens: 5 });
  refused(50, { max_completion_tokens: 50, n: 2 });
  refused(50, { max_completion_tokens: '50' });
  refused(50, { temperature: 0 });
  refused(50, { max_tokens: 1 }, 1, undefined);
});
