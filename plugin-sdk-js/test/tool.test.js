import assert from 'node:assert/strict';
import { test } from 'node:test';

import { installHost } from '../src/host.js';
import { InvalidArguments, ProviderError, ToolFailure, ToolResult, exportTools } from '../src/index.js';

const context = (settings = '') => ({ server: 'text', settings, secrets: [['token', 's3']] });
const input = { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] };

const { info, listTools, callTool } = exportTools({
  name: 'text-tools',
  version: '1.2.3',
  tools: [
    {
      name: 'upper',
      title: 'Upper case',
      description: 'Upper-cases a text.',
      inputSchema: input,
      annotations: { readOnlyHint: true },
      handler: ({ text }) => text.toUpperCase(),
    },
    {
      name: 'count',
      inputSchema: input,
      outputSchema: { type: 'object', properties: { length: { type: 'integer' } } },
      handler: ({ text }) => ({ length: text.length }),
    },
    {
      name: 'check',
      inputSchema: { type: 'object', properties: { a: {}, b: {} }, required: ['a', 'b'] },
      handler: ({ a }) => {
        if (a === 'fail') throw new ToolFailure('no such city: fail');
        if (a === 'invalid') throw new InvalidArguments('`a` must name a city');
        if (a === 'upstream') throw ProviderError.upstream(503, 'down');
        return ToolResult.text('ok').image(new Uint8Array([1]), 'image/png').structured({ a });
      },
    },
    {
      name: 'settings',
      handler: (_, ctx) => JSON.stringify({ server: ctx.server, ...ctx.settings({ limit: 3 }), token: ctx.secret('token') }),
    },
  ],
});

/** What an export threw as the bindings see it: the WIT's `tool-error`. */
function toolError(run) {
  try {
    run();
  } catch (thrown) {
    return thrown.payload;
  }
  assert.fail('nothing was thrown');
}

test('info and the listing, schemas and annotations as JSON text', () => {
  assert.deepEqual(info(), { name: 'text-tools', version: '1.2.3', models: [] });
  const [upper, count, , settings] = listTools(context());
  assert.deepEqual(upper, {
    name: 'upper',
    title: 'Upper case',
    description: 'Upper-cases a text.',
    inputSchema: JSON.stringify(input),
    outputSchema: undefined,
    annotations: '{"readOnlyHint":true}',
  });
  assert.deepEqual(JSON.parse(count.outputSchema), { type: 'object', properties: { length: { type: 'integer' } } });
  assert.equal(settings.inputSchema, '{"type":"object"}', 'a tool without arguments takes an empty object');
});

test('a string is one text block', () => {
  assert.deepEqual(callTool('upper', '{"text":"hi"}', context()), {
    content: [{ tag: 'text', val: 'HI' }],
    structuredContent: undefined,
    isError: false,
  });
});

test('an object of a tool with an output schema is structured content, and its JSON as text', () => {
  assert.deepEqual(callTool('count', '{"text":"four"}', context()), {
    content: [{ tag: 'text', val: '{"length":4}' }],
    structuredContent: '{"length":4}',
    isError: false,
  });
});

test('a ToolResult keeps its own blocks beside structured content', () => {
  const result = callTool('check', '{"a":"x","b":1}', context());
  assert.deepEqual(result.content, [
    { tag: 'text', val: 'ok' },
    { tag: 'image', val: { data: new Uint8Array([1]), mediaType: 'image/png' } },
  ]);
  assert.equal(result.structuredContent, '{"a":"x"}');
  const built = new ToolResult()
    .audio(new Uint8Array([2]), 'audio/wav')
    .resourceLink('file:///a.txt', 'a.txt', { mediaType: 'text/plain' })
    .resource('file:///b.txt', 'B')
    .resource('file:///c.bin', new Uint8Array([3]), 'application/octet-stream')
    .toWit();
  assert.deepEqual(
    built.content.map((block) => block.tag),
    ['audio', 'resource-link', 'embedded', 'embedded'],
  );
  assert.deepEqual(built.content[2].val, { uri: 'file:///b.txt', mediaType: undefined, body: { tag: 'text', val: 'B' } });
  assert.deepEqual(built.content[3].val.body, { tag: 'blob', val: new Uint8Array([3]) });
  assert.deepEqual(ToolResult.error('bad').toWit(), {
    content: [{ tag: 'text', val: 'bad' }],
    structuredContent: undefined,
    isError: true,
  });
});

test('a ToolFailure is an is-error result saying its message', () => {
  assert.deepEqual(callTool('check', '{"a":"fail","b":1}', context()), {
    content: [{ tag: 'text', val: 'no such city: fail' }],
    structuredContent: undefined,
    isError: true,
  });
});

test('InvalidArguments, from the handler or the SDK, is invalid-arguments', () => {
  assert.deepEqual(toolError(() => callTool('check', '{"a":"invalid","b":1}', context())), {
    tag: 'invalid-arguments',
    val: '`a` must name a city',
  });
  assert.deepEqual(toolError(() => callTool('check', '{"b":null}', context())), {
    tag: 'invalid-arguments',
    val: 'missing required argument: `a`',
  });
  assert.deepEqual(toolError(() => callTool('check', '{}', context())), {
    tag: 'invalid-arguments',
    val: 'missing required arguments: `a`, `b`',
  });
  for (const args of ['[1]', '"text"', 'null', '3']) {
    assert.deepEqual(toolError(() => callTool('upper', args, context())), {
      tag: 'invalid-arguments',
      val: 'the arguments must be a JSON object',
    });
  }
  assert.equal(toolError(() => callTool('upper', '{', context())).tag, 'invalid-arguments');
});

test('an unknown tool is unknown-tool; a ProviderError is failed', () => {
  assert.deepEqual(toolError(() => callTool('nope', '{}', context())), { tag: 'unknown-tool', val: 'nope' });
  assert.deepEqual(toolError(() => callTool('check', '{"a":"upstream","b":1}', context())), {
    tag: 'failed',
    val: 'HTTP 503: down',
  });
});

test("the context: the server, its settings over defaults, its secrets", () => {
  const { content } = callTool('settings', '', context('{"limit": 5}'));
  assert.deepEqual(JSON.parse(content[0].val), { server: 'text', limit: 5, token: 's3' });
  assert.deepEqual(toolError(() => callTool('settings', '{}', context('{"limt": 5}'))), {
    tag: 'failed',
    val: 'MCP server `text`: unknown setting `limt`, expected one of `limit`',
  });
});

test('tools may depend on the context', () => {
  const exported = exportTools({
    name: 'n',
    version: '1',
    tools: (ctx) => [{ name: `echo_${ctx.server}`, handler: (args) => JSON.stringify(args) }],
  });
  assert.deepEqual(
    exported.listTools(context()).map((tool) => tool.name),
    ['echo_text'],
  );
  assert.equal(exported.callTool('echo_text', '{"x":1}', context()).content[0].val, '{"x":1}');
});

test('any other exception, or a result of the wrong kind, is logged once and ends the instance', async () => {
  const logged = [];
  installHost({ log: { log: (level, message) => logged.push([level, message]), enabled: () => true } });
  const exported = exportTools({
    name: 'n',
    version: '1',
    tools: [
      { name: 'bug', handler: () => null.field },
      { name: 'number', handler: () => 42 },
      { name: 'bad name!', handler: () => '' },
    ],
  });
  const pending = (value) =>
    Promise.race([value.then(() => 'settled'), new Promise((resolve) => setTimeout(() => resolve('pending'), 10))]);
  for (const [run, message] of [
    [() => exported.callTool('bug', '{}', context()), /^plugin raised TypeError: /],
    [() => exported.callTool('number', '{}', context()), /tool `number` returned a number: return a string or a ToolResult/],
    [() => exported.listTools(context()), /tool name "bad name!"/],
  ]) {
    logged.length = 0;
    const ended = run();
    assert.ok(ended instanceof Promise, 'the export returns a promise that never settles');
    assert.equal(await pending(ended), 'pending');
    assert.equal(logged.length, 1);
    assert.equal(logged[0][0], 'error');
    assert.match(logged[0][1], message);
  }
  installHost({ log: undefined });
});
