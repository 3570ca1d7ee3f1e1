// `npm test`: the tool under Node, without a gateway, its HTTP requests answered by each test's
// scripted upstream.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { ToolCall, json } from 'gateway-plugin-sdk/testing';

import * as plugin from '../index.js';

const BASE = 'https://api.example.com';
// As the gateway's config would set it up: the API's host allowed, its URL in the settings.
const server = () => ToolCall.server('items').settings({ base_url: BASE }).allowHosts('api.example.com');

test('a found item is the structured result', () => {
  const item = { id: 'a-1', name: 'Anvil' };
  const run = server().callTool(plugin, 'lookup', { id: 'a-1' }, () => json(200, item));
  const result = run.unwrap();
  assert.equal(result.isError, false);
  assert.deepEqual(JSON.parse(result.structuredContent), item);
  assert.deepEqual(JSON.parse(result.content[0].val), item);

  const [request] = run.sent;
  assert.equal(request.method, 'GET');
  assert.equal(request.url, `${BASE}/items/a-1`);
});

test('a missing item is an error result for the model; a failing API fails the call', () => {
  const missing = server().callTool(plugin, 'lookup', { id: 'b-2' }, () => json(404, { error: 'not found' }));
  assert.equal(missing.unwrap().isError, true);
  assert.deepEqual(missing.unwrap().content, [{ tag: 'text', val: 'no item b-2' }]);

  const broken = server().callTool(plugin, 'lookup', { id: 'b-2' }, () => json(500, { error: 'down' }));
  assert.equal(broken.error.tag, 'failed');
  assert.match(broken.error.val, /500/);
});

test('a bad id is an error result, and nothing is sent', () => {
  for (const id of ['', 'a/../b', 'x'.repeat(65)]) {
    const run = server().callTool(plugin, 'lookup', { id });
    assert.equal(run.unwrap().isError, true);
    assert.deepEqual(run.unwrap().content, [{ tag: 'text', val: 'id is 1 to 64 letters, digits, - or _' }]);
    assert.deepEqual(run.sent, []);
  }
});
