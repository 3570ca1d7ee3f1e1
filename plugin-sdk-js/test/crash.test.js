import assert from 'node:assert/strict';
import { test } from 'node:test';

import { callPlugin, describe } from '../src/crash.js';
import { installHost } from '../src/host.js';
import { HttpProvider, exportProvider } from '../src/provider.js';
import { ProviderError } from '../src/errors.js';

function lookup(table) {
  return table.model.name;
}

function complete() {
  return lookup({});
}

function thrownBy(run) {
  try {
    callPlugin(run);
  } catch (error) {
    return error;
  }
  throw new Error('nothing was thrown');
}

test("a crash is told by its type, its message and the plugin's frames only", () => {
  const lines = describe(thrownBy(() => complete())).split('\n');
  assert.match(lines[0], /^plugin raised TypeError: .*name/);
  assert.match(lines[1], /lookup/);
  assert.match(lines[2], /complete/);
  // The arrow calling the plugin, `callPlugin` and what called it are the SDK's.
  assert.equal(lines.length, 3, lines.join('\n'));
  assert.equal(describe('a string'), 'plugin raised string: a string');
});

test('an exception is logged once and ends the instance; a ProviderError is the error', async () => {
  const logged = [];
  installHost({ log: { log: (level, message) => logged.push([level, message]), enabled: () => true } });
  const { complete: exported, embed } = exportProvider({
    complete: () => complete(),
    embed: () => {
      throw ProviderError.invalidRequest('no embeddings here');
    },
  });
  const ended = exported({});
  assert.ok(ended instanceof Promise, 'the export returns a promise that never settles');
  const settled = await Promise.race([ended.then(() => 'settled'), new Promise((r) => setTimeout(() => r('pending'), 10))]);
  assert.equal(settled, 'pending');
  assert.equal(logged.length, 1);
  assert.equal(logged[0][0], 'error');
  assert.match(logged[0][1], /^plugin raised TypeError: [^\n]*\n {2}.*lookup/);
  assert.throws(() => embed({}), (thrown) => thrown.payload.tag === 'invalid-request' && thrown.payload.val === 'no embeddings here');
  assert.equal(logged.length, 1);
  installHost({ log: undefined });
});

test('a token count is the gateway\'s unless the provider counts', () => {
  const { countTokens } = exportProvider({ complete: () => ({}) });
  assert.equal(countTokens({ model: 'm' }), undefined);
  const counting = exportProvider({ countTokens: (call) => ({ inputTokens: call.model.length, estimated: false }) });
  assert.deepEqual(counting.countTokens({ model: 'abc' }), { inputTokens: 3, estimated: false });
  const refusing = exportProvider({
    countTokens: () => {
      throw ProviderError.invalidRequest('no counts here');
    },
  });
  assert.throws(() => refusing.countTokens({}), (thrown) => thrown.payload.val === 'no counts here');
});

test('a rerank is refused as invalid unless the provider reranks', () => {
  const request = { model: 'r', query: 'q', documents: ['a', 'bb', 'ccc'], topN: 2, params: '{}' };
  const refusedAs = (message) => (thrown) => thrown.payload.tag === 'invalid-request' && thrown.payload.val === message;
  class Chat extends HttpProvider {
    info() {
      return { name: 'chat-js', version: '0.1.0', models: [] };
    }
  }
  assert.throws(() => exportProvider(new Chat()).rerank(request), refusedAs('chat-js does not support rerank'));
  const plain = exportProvider({ info: () => ({ name: 'plain-js', version: '0.1.0', models: [] }), complete: () => ({}) });
  assert.throws(() => plain.rerank(request), refusedAs('plain-js does not support rerank'));
  class Ranking extends Chat {
    rerank(call) {
      const results = call.documents
        .map((text, index) => ({ index, relevanceScore: text.length }))
        .sort((a, b) => b.relevanceScore - a.relevanceScore);
      return { model: call.model, results: results.slice(0, call.topN), usage: undefined, searchUnits: 1 };
    }
  }
  assert.throws(
    () => exportProvider(new Ranking()).generateImages({ model: 'r', prompt: 'a cat', n: 1, params: '{}' }),
    refusedAs('chat-js does not support image generation'),
  );
  assert.throws(() => plain.generateImages({}), refusedAs('plain-js does not support image generation'));
  assert.throws(() => plain.transcribe({}), refusedAs('plain-js does not support transcription'));
  assert.throws(
    () => exportProvider(new Chat()).transcribe({ model: 'w', audio: new Uint8Array([1]), fileName: 'a.wav', translate: false, params: '{}' }),
    refusedAs('chat-js does not support transcription'),
  );
  assert.deepEqual(exportProvider(new Ranking()).rerank(request), {
    model: 'r',
    results: [
      { index: 2, relevanceScore: 3 },
      { index: 1, relevanceScore: 2 },
    ],
    usage: undefined,
    searchUnits: 1,
  });
  const refusing = exportProvider({
    rerank: () => {
      throw ProviderError.invalidRequest('no documents today');
    },
  });
  assert.throws(() => refusing.rerank(request), refusedAs('no documents today'));
});
