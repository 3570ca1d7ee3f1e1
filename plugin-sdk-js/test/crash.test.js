import assert from 'node:assert/strict';
import { test } from 'node:test';

import { callPlugin, describe } from '../src/crash.js';
import { installHost } from '../src/host.js';
import { Sink } from '../src/answer.js';
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
  assert.throws(() => plain.speak({}), refusedAs('plain-js does not support speech'));
  assert.throws(
    () => exportProvider(new Chat()).speak({ model: 's', input: 'hi', voice: 'alloy', format: 'mp3', params: '{}' }),
    refusedAs('chat-js does not support speech'),
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

test('a speech sends its audio through the host\'s sink; the caller gone ends it', () => {
  const request = { model: 'tts-1', input: 'hello there', voice: 'coral', format: 'wav', params: '{}' };
  class Speaking extends HttpProvider {
    info() {
      return { name: 'speaking-js', version: '0.1.0', models: [] };
    }

    speak(call, sink) {
      for (const word of call.input.split(' ')) {
        sink.sendAudio(new TextEncoder().encode(`${call.voice}:${word};`));
      }
      sink.sendAudio(new Uint8Array());
      return { model: call.model, usage: { promptTokens: 1, completionTokens: 2, totalTokens: 3 } };
    }
  }
  const sent = [];
  installHost({ sink: { sendAudio: (bytes) => sent.push(new TextDecoder().decode(bytes)) } });
  const { speak } = exportProvider(new Speaking());
  assert.deepEqual(speak(request), { model: 'tts-1', usage: { promptTokens: 1, completionTokens: 2, totalTokens: 3 } });
  assert.deepEqual(sent, ['coral:hello;', 'coral:there;'], 'no empty piece');

  let tries = 0;
  installHost({
    sink: {
      sendAudio: () => {
        tries += 1;
        throw { payload: undefined };
      },
    },
  });
  assert.throws(
    () => speak(request),
    (thrown) => thrown.payload.tag === 'failed' && thrown.payload.val === 'the caller disconnected',
  );
  assert.equal(tries, 1, 'the plugin stopped at the first failed send');
  installHost({ sink: undefined });

  const buffered = Sink.buffered();
  buffered.sendAudio(Uint8Array.of(1, 2));
  buffered.sendAudio(Uint8Array.of(3).buffer);
  assert.deepEqual(buffered.audio, [Uint8Array.of(1, 2), Uint8Array.of(3)]);
  assert.deepEqual(buffered.sent, []);
  assert.throws(() => new Sink(() => {}).sendAudio(Uint8Array.of(1)), /takes no audio/);
});
