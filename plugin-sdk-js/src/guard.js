// A guard plugin (the `guard` world of wit/guard.wit): checks each request before it reaches the
// provider plugin, and each answer before it reaches the caller.
//
// Subclass `Guard`, override `checkRequest` and/or `checkResponse` (both allow by default) and
// return `allow()`, `deny(reason)` or `rewrite(texts, changes)`; export what `exportGuard(MyGuard)`
// returns. `texts(...)` lists the texts to look at: the prompt's or the conversation's text parts,
// or an embeddings request's inputs, in order; `rewrite` takes the same list back, changed.
//
// A deny reason is shown to the caller and recorded: name the rule that matched, never the text
// that matched it (it may be the very secret the guard keeps out). The gateway names the guard
// itself (`the request was blocked by guard "ID": REASON`), so the reason need not. A guard that
// throws ends its instance and the gateway refuses the request (it fails closed).

import { callPlugin, crash } from './crash.js';
import { paramsObject, settingsObject } from './values.js';

/** Let it through unchanged. */
export class Allow {}

/** Refuse it, for `reason` (shown to the caller and recorded). */
export class Deny {
  /** @param {string} reason */
  constructor(reason) {
    this.reason = reason;
  }
}

/** Send (or answer) these texts instead; `changes` counts what changed by kind. */
export class Rewrite {
  /**
   * @param {string[]} texts
   * @param {Record<string, number>} changes
   */
  constructor(texts, changes) {
    this.texts = texts;
    this.changes = changes;
  }
}

export function allow() {
  return new Allow();
}

/** @param {string} reason */
export function deny(reason) {
  if (typeof reason !== 'string') {
    throw new TypeError(`a deny reason must be a string, not ${kindOf(reason)}`);
  }
  return new Deny(reason);
}

const MAX_COUNT = 4294967295;

/**
 * The texts of `texts(...)`, in the same order and number, some changed; `changes` counts the
 * changes by kind (`{email: 2}`): it is recorded, so it never holds removed text.
 *
 * @param {string[]} newTexts
 * @param {Record<string, number>} [changes]
 */
export function rewrite(newTexts, changes = {}) {
  if (!Array.isArray(newTexts) || newTexts.some((text) => typeof text !== 'string')) {
    throw new TypeError('a rewrite takes an array of strings: the texts of `texts(...)`, changed');
  }
  if (typeof changes !== 'object' || changes === null || Array.isArray(changes)) {
    throw new TypeError('a rewrite counts its changes in an object: `{email: 2}`');
  }
  for (const [kind, count] of Object.entries(changes)) {
    // The WIT's count is a u32: anything else would fail in the bindings, far from its cause.
    if (!Number.isInteger(count) || count < 0 || count > MAX_COUNT) {
      throw new TypeError(`a rewrite's count of \`${kind}\` must be a whole number from 0, not ${count}`);
    }
  }
  return new Rewrite([...newTexts], { ...changes });
}

/**
 * What a guard is shown of a call (`request.raw` is the WIT record): the guard's id and settings,
 * the route, the model, the input, the functions offered and the caller's params, without keys or
 * secrets.
 */
export class GuardRequest {
  constructor(raw) {
    this.raw = raw;
    /** The guard's id in the config (`[guards.ID]`). */
    this.guard = raw.guard;
    this.route = raw.route;
    this.model = raw.model;
    /** `{tag: 'prompt', val: prompt}` or `{tag: 'embedding', val: texts}`. */
    this.input = raw.input;
    this.functions = raw.functions;
  }

  /**
   * The guard's `settings` from the config over `defaults`; given defaults, other keys and values of
   * another type than their default are refused: the guard fails, and the gateway with it refuses
   * the request, its log naming the guard and the setting.
   */
  settings(defaults) {
    return settingsObject(this.raw.settings, `guard \`${this.guard}\``, defaults);
  }

  /** The caller's pass-through parameters, as an object. */
  params() {
    return paramsObject(this.raw.params);
  }

  texts() {
    return texts(this);
  }
}

/**
 * The texts of a `GuardRequest` (its input's), of an input, of a prompt, or of an answer (one per
 * choice), in order. Images, audio, documents and reasoning are not text a guard can rewrite
 * (reasoning is signed), so they are not listed.
 *
 * @returns {string[]}
 */
export function texts(of) {
  if (of instanceof GuardRequest) {
    return texts(of.input);
  }
  if (Array.isArray(of?.choices)) {
    return of.choices.map((choice) => choice.text);
  }
  switch (of?.tag) {
    case 'embedding':
      return [...of.val];
    case 'prompt':
      return texts(of.val);
    case 'text':
      return [of.val];
    case 'chat':
      return of.val.flatMap((message) => message.parts.filter((part) => part.tag === 'text').map((part) => part.val));
  }
  throw new TypeError(`no texts in ${kindOf(of)}`);
}

/** `input` of the same kind with its texts (as `texts` lists them) replaced by `next`. */
function withTexts(input, next) {
  const count = texts(input).length;
  if (next.length !== count) {
    throw new RangeError(`a rewrite has ${next.length} texts for ${count}`);
  }
  if (input.tag === 'embedding') {
    return { tag: 'embedding', val: next };
  }
  const prompt = input.val;
  if (prompt.tag === 'text') {
    return { tag: 'prompt', val: { tag: 'text', val: next[0] } };
  }
  let n = 0;
  const messages = prompt.val.map((message) => ({
    ...message,
    parts: message.parts.map((part) => (part.tag === 'text' ? { tag: 'text', val: next[n++] } : part)),
  }));
  return { tag: 'prompt', val: { tag: 'chat', val: messages } };
}

const changeList = (changes) => Object.entries(changes).map(([kind, count]) => ({ kind, count }));

/**
 * A check's result, checked: anything but a verdict is the guard's bug, and letting it through
 * would turn a forgotten `return` into an unchecked request.
 */
function verdictOf(value, method) {
  if (value instanceof Allow || value instanceof Deny || value instanceof Rewrite) {
    return value;
  }
  const got = typeof value?.then === 'function' ? 'a promise (checks are synchronous)' : kindOf(value);
  throw new TypeError(`${method} returned ${got}: return allow(), deny(reason) or rewrite(texts, changes)`);
}

function kindOf(value) {
  if (value === null || value === undefined) {
    return String(value);
  }
  if (typeof value !== 'object') {
    return `a ${typeof value}`;
  }
  const name = value.constructor?.name;
  return name && name !== 'Object' ? `a ${name}` : 'an object';
}

/**
 * A guard. Set `static NAME` and `static VERSION`; override what it checks. Each request has a
 * fresh instance; its answer's check usually runs in the component instance that checked the
 * request, but may run in another, so keep nothing between them.
 */
export class Guard {
  static NAME = 'js-guard';
  static VERSION = '0.1.0';

  /** Its name and version (no models). */
  info() {
    return { name: this.constructor.NAME, version: this.constructor.VERSION, models: [] };
  }

  /**
   * Before the provider: default allow.
   *
   * @param {GuardRequest} request
   */
  checkRequest(request) {
    return allow();
  }

  /**
   * The whole answer (for a stream, once it has ended): default allow.
   *
   * @param {GuardRequest} request
   * @param {{model: string, choices: {text: string}[]}} answer
   */
  checkResponse(request, answer) {
    return allow();
  }
}

/**
 * The functions the component exports (the `guard` world's `info`, `check-request`,
 * `check-response`) for `guard`, a `Guard` subclass (the class: each call has its own instance).
 * Export them from the plugin's module:
 *
 *     export const { info, checkRequest, checkResponse } = exportGuard(MyGuard);
 *
 * Any exception is a bug: logged once and ending the instance (`crash`); the gateway refuses the
 * request unchecked.
 */
export function exportGuard(guard) {
  if (typeof guard !== 'function') {
    throw new TypeError('exportGuard takes the Guard subclass itself, not an instance');
  }
  const checked = (run) => {
    try {
      return run();
    } catch (error) {
      return crash(error, 'guard');
    }
  };
  const requestVerdict = (raw) => {
    const request = new GuardRequest(raw);
    const verdict = verdictOf(callPlugin(() => new guard().checkRequest(request)), 'checkRequest');
    if (verdict instanceof Deny) {
      return { tag: 'deny', val: verdict.reason };
    }
    if (verdict instanceof Rewrite) {
      const input = withTexts(request.input, verdict.texts);
      return { tag: 'rewrite', val: { input, changes: changeList(verdict.changes) } };
    }
    return { tag: 'allow' };
  };
  const answerVerdict = (raw, answer) => {
    const request = new GuardRequest(raw);
    const verdict = verdictOf(callPlugin(() => new guard().checkResponse(request, answer)), 'checkResponse');
    if (verdict instanceof Deny) {
      return { tag: 'deny', val: verdict.reason };
    }
    if (verdict instanceof Rewrite) {
      if (verdict.texts.length !== answer.choices.length) {
        throw new RangeError(
          `an answer rewrite has ${verdict.texts.length} texts for ${answer.choices.length} choices`,
        );
      }
      return { tag: 'rewrite', val: { texts: verdict.texts, changes: changeList(verdict.changes) } };
    }
    return { tag: 'allow' };
  };
  return {
    info: () => checked(() => callPlugin(() => new guard().info())),
    checkRequest: (request) => checked(() => requestVerdict(request)),
    checkResponse: (request, answer) => checked(() => answerVerdict(request, answer)),
  };
}
