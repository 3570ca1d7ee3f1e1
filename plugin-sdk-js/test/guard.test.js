import assert from 'node:assert/strict';
import { test } from 'node:test';

import { installHost } from '../src/host.js';
import { Guard, GuardRequest, allow, deny, exportGuard, rewrite, texts } from '../src/index.js';

const message = (role, ...parts) => ({ role, parts, toolCalls: [], isError: false });
const text = (val) => ({ tag: 'text', val });
const image = { tag: 'image', val: { source: { tag: 'url', val: 'https://x/sk-1.png' } } };
const reasoning = { tag: 'reasoning', val: { text: 'sk-1 thought', signature: 'sig' } };

const CHAT = {
  tag: 'prompt',
  val: {
    tag: 'chat',
    val: [
      message('system', text('be nice')),
      { ...message('user', text('my key is sk-1'), image, text('thanks')), name: 'jane' },
      message('assistant', reasoning, text('noted sk-1')),
      { ...message('tool', text('tool says sk-1')), toolCallId: 'call_1' },
    ],
  },
};
const PROMPT = { tag: 'prompt', val: { tag: 'text', val: 'my key is sk-1' } };
const EMBEDDING = { tag: 'embedding', val: ['sk-1', 'x', 'sk-1 sk-1'] };

/** What the gateway shows a guard: its id and settings, the route, the model, the input. */
const checked = (input, settings = '{}') => ({
  guard: 'g1',
  settings,
  route: 'r',
  model: 'm',
  input,
  functions: [],
  params: '{"temperature":0.5}',
});

const answer = (...choices) => ({
  model: 'm',
  choices: choices.map((t, index) => ({ index, text: t, reasoning: [], toolCalls: [] })),
});

const redacted = (t) => t.replaceAll('sk-1', '[key]');

/** Redacts `sk-1` in requests and answers, or denies it with `mode = "deny"`. */
class Redact extends Guard {
  static NAME = 'redact';
  static VERSION = '1.2.3';

  checkRequest(request) {
    const found = request.texts().filter((t) => t.includes('sk-')).length;
    if (found === 0) {
      return allow();
    }
    if (request.settings({ mode: 'rewrite' }).mode === 'deny') {
      return deny('rule `keys` matched');
    }
    return rewrite(request.texts().map(redacted), { key: found });
  }

  checkResponse(request, answer) {
    if (texts(answer).some((t) => t.includes('sk-'))) {
      return request.settings({ mode: 'rewrite' }).mode === 'deny'
        ? deny('rule `keys` matched the answer')
        : rewrite(texts(answer).map(redacted), { key: 1 });
    }
    return allow();
  }
}

const redact = exportGuard(Redact);

test('texts lists a text prompt, a chat\'s text parts in order, embeddings and answers', () => {
  assert.deepEqual(texts(PROMPT), ['my key is sk-1']);
  assert.deepEqual(texts(CHAT), ['be nice', 'my key is sk-1', 'thanks', 'noted sk-1', 'tool says sk-1']);
  assert.deepEqual(texts(EMBEDDING), ['sk-1', 'x', 'sk-1 sk-1']);
  assert.deepEqual(texts(CHAT.val), texts(CHAT), 'a prompt as well as an input');
  assert.deepEqual(texts(answer('a', '', 'c')), ['a', '', 'c']);
  assert.deepEqual(new GuardRequest(checked(CHAT)).texts(), texts(CHAT));
  assert.throws(() => texts({ tag: 'nothing' }), /no texts in an object/);
});

test('both checks allow by default; info is the class\'s NAME and VERSION', () => {
  const plain = exportGuard(Guard);
  assert.deepEqual(plain.checkRequest(checked(CHAT)), { tag: 'allow' });
  assert.deepEqual(plain.checkResponse(checked(CHAT), answer('sk-1')), { tag: 'allow' });
  assert.deepEqual(plain.info(), { name: 'js-guard', version: '0.1.0', models: [] });
  assert.deepEqual(redact.info(), { name: 'redact', version: '1.2.3', models: [] });
});

test('a request without a match is allowed', () => {
  assert.deepEqual(redact.checkRequest(checked({ tag: 'prompt', val: { tag: 'text', val: 'hello' } })), {
    tag: 'allow',
  });
});

test('a denial is the reason as the guard wrote it: the gateway names the guard', () => {
  assert.deepEqual(redact.checkRequest(checked(CHAT, '{"mode": "deny"}')), { tag: 'deny', val: 'rule `keys` matched' });
  assert.deepEqual(redact.checkResponse(checked(CHAT, '{"mode": "deny"}'), answer('ok', 'sk-1!')), {
    tag: 'deny',
    val: 'rule `keys` matched the answer',
  });
  assert.throws(() => deny(undefined), /a deny reason must be a string, not undefined/);
});

test('a rewrite of a chat changes its text parts only and keeps every other field', () => {
  const verdict = redact.checkRequest(checked(CHAT));
  assert.equal(verdict.tag, 'rewrite');
  assert.deepEqual(verdict.val.changes, [{ kind: 'key', count: 3 }]);
  const input = verdict.val.input;
  assert.deepEqual(texts(input), ['be nice', 'my key is [key]', 'thanks', 'noted [key]', 'tool says [key]']);
  const [, user, assistant, tool] = input.val.val;
  assert.equal(user.name, 'jane');
  assert.equal(user.role, 'user');
  assert.deepEqual(user.parts[1], image, 'an image stays as it was, its URL too');
  assert.deepEqual(assistant.parts[0], reasoning, 'signed reasoning is not rewritten');
  assert.equal(tool.toolCallId, 'call_1');
  assert.deepEqual(texts(CHAT)[1], 'my key is sk-1', "the caller's input is not changed in place");
});

test('a rewrite of a text prompt or of embeddings keeps its kind and number', () => {
  assert.deepEqual(redact.checkRequest(checked(PROMPT)), {
    tag: 'rewrite',
    val: {
      input: { tag: 'prompt', val: { tag: 'text', val: 'my key is [key]' } },
      changes: [{ kind: 'key', count: 1 }],
    },
  });
  assert.deepEqual(redact.checkRequest(checked(EMBEDDING)), {
    tag: 'rewrite',
    val: { input: { tag: 'embedding', val: ['[key]', 'x', '[key] [key]'] }, changes: [{ kind: 'key', count: 2 }] },
  });
});

test('an answer rewrite gives one text per choice', () => {
  assert.deepEqual(redact.checkResponse(checked(CHAT), answer('ok', 'sk-1!')), {
    tag: 'rewrite',
    val: { texts: ['ok', '[key]!'], changes: [{ kind: 'key', count: 1 }] },
  });
  assert.deepEqual(redact.checkResponse(checked(CHAT), answer('fine')), { tag: 'allow' });
});

test('the request: settings over defaults, params, and its values', () => {
  const request = new GuardRequest(checked(PROMPT, '{"words": ["a"]}'));
  assert.equal(request.guard, 'g1');
  assert.equal(request.route, 'r');
  assert.equal(request.model, 'm');
  assert.deepEqual(request.settings({ words: [], strict: false }), { words: ['a'], strict: false });
  assert.deepEqual(request.settings(), { words: ['a'] });
  assert.deepEqual(request.params(), { temperature: 0.5 });
  assert.throws(() => request.settings({ strict: false }), /guard `g1`: unknown setting `words`/);
  assert.throws(() => request.settings({ words: '' }), /guard `g1`: setting `words`: expected a string, got a list/);
});

test('rewrite refuses what the WIT cannot carry', () => {
  assert.throws(() => rewrite('text'), /an array of strings/);
  assert.throws(() => rewrite([1]), /an array of strings/);
  assert.throws(() => rewrite(['a'], [['email', 1]]), /in an object/);
  assert.throws(() => rewrite(['a'], { email: -1 }), /count of `email` must be a whole number from 0, not -1/);
  assert.throws(() => rewrite(['a'], { email: 1.5 }), /not 1.5/);
  assert.deepEqual(rewrite(['a']).changes, {}, 'a rewrite may count nothing');
});

/** Runs `run` with a fake log; what it logged and whether the export's promise stayed pending. */
async function crashed(run) {
  const logged = [];
  installHost({ log: { log: (level, line) => logged.push([level, line]), enabled: () => true } });
  try {
    const ended = run();
    assert.ok(ended instanceof Promise, 'the export returns a promise that never settles');
    const settled = await Promise.race([
      ended.then(() => 'settled'),
      new Promise((resolve) => setTimeout(() => resolve('pending'), 10)),
    ]);
    assert.equal(settled, 'pending');
    assert.equal(logged.length, 1, 'logged once');
    assert.equal(logged[0][0], 'error');
    return logged[0][1];
  } finally {
    installHost({ log: undefined });
  }
}

test('a thrown exception is logged once and ends the instance: the gateway refuses the request', async () => {
  class Broken extends Guard {
    checkRequest(request) {
      return request.model.missing.field;
    }
  }
  const line = await crashed(() => exportGuard(Broken).checkRequest(checked(PROMPT)));
  assert.match(line, /^guard raised TypeError: /);
  assert.match(line, /checkRequest/, "the guard's frame");

  const misspelt = await crashed(() => redact.checkRequest(checked(CHAT, '{"mood": "deny"}')));
  assert.match(misspelt, /^guard raised ProviderError: guard `g1`: unknown setting `mood`/);
});

test('a rewrite of the wrong number of texts ends the instance', async () => {
  class Short extends Guard {
    checkRequest() {
      return rewrite(['only one']);
    }

    checkResponse() {
      return rewrite(['only one'], { x: 1 });
    }
  }
  const short = exportGuard(Short);
  assert.match(await crashed(() => short.checkRequest(checked(CHAT))), /RangeError: a rewrite has 1 texts for 5/);
  assert.match(
    await crashed(() => short.checkResponse(checked(CHAT), answer('a', 'b'))),
    /RangeError: an answer rewrite has 1 texts for 2 choices/,
  );
  assert.deepEqual(short.checkResponse(checked(CHAT), answer('a')), {
    tag: 'rewrite',
    val: { texts: ['only one'], changes: [{ kind: 'x', count: 1 }] },
  });
});

test('a check that returns no verdict ends the instance rather than allow', async () => {
  class Forgetful extends Guard {
    checkRequest(request) {
      if (request.model === 'other') {
        return allow();
      }
    }

    checkResponse() {
      return Promise.resolve(allow());
    }
  }
  const forgetful = exportGuard(Forgetful);
  assert.match(
    await crashed(() => forgetful.checkRequest(checked(PROMPT))),
    /checkRequest returned undefined: return allow\(\)/,
  );
  assert.match(
    await crashed(() => forgetful.checkResponse(checked(PROMPT), answer('a'))),
    /checkResponse returned a promise \(checks are synchronous\)/,
  );
  assert.throws(() => exportGuard(new Redact()), /the Guard subclass itself, not an instance/);
});
