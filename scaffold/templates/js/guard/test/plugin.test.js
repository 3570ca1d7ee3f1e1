// `npm test`: the guard under Node, without a gateway, shown requests as the gateway shows them.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { GuardCall, message } from 'gateway-plugin-sdk/testing';

import * as plugin from '../index.js';

const SETTINGS = { words: ['secret', 'Project X'] };

test('denies a blocked word, in any case', () => {
  const prompt = GuardCall.prompt('Tell me the SECRET plan').settings(SETTINGS).checkRequest(plugin);
  assert.deepEqual(prompt.result, { tag: 'deny', val: 'the request mentions "secret"' });

  const chat = GuardCall.chat([message('system', 'Be brief.'), message('user', 'What is project x?')])
    .settings(SETTINGS)
    .checkRequest(plugin);
  assert.deepEqual(chat.result, { tag: 'deny', val: 'the request mentions "Project X"' });
});

test('allows the rest', () => {
  const run = GuardCall.chat([message('user', 'Hello'), message('assistant', 'Hi! Any questions?')])
    .settings(SETTINGS)
    .checkRequest(plugin);
  assert.deepEqual(run.result, { tag: 'allow' });
  assert.deepEqual(GuardCall.prompt('a secret').checkRequest(plugin).result, { tag: 'allow' }, 'no words, nothing blocked');
});

test('embedding inputs too', () => {
  const run = GuardCall.embedding(['fine', 'top secret']).settings(SETTINGS).checkRequest(plugin);
  assert.deepEqual(run.result, { tag: 'deny', val: 'the request mentions "secret"' });
});

test('a misspelt setting fails the guard, so the gateway refuses the request', () => {
  const run = GuardCall.prompt('Hello').settings({ word: ['secret'] }).checkRequest(plugin);
  assert.match(run.crash, /unknown setting `word`/);
});
