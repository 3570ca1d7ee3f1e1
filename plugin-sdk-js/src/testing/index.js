// `gateway-plugin-sdk/testing`: the SDK's own fake host, to run a plugin under Node (`node --test`)
// without a gateway. A test builds what the gateway would pass (`Call` for a provider, `GuardCall`
// for a guard, `ToolCall` for a tool), runs the plugin's exported functions on it (the same ones
// the gateway calls), answers the plugin's HTTP requests with an upstream of its own, and reads
// the run: the result, or the error or crash, every request sent, the chunks streamed (the audio
// spoken), the lines logged. As in the gateway, a request to another host than the route's `base_url`'s (a tool's
// allowed hosts) is refused before the upstream sees it; `kv` keeps entries between runs.
//
// Importing this module registers a resolution hook (`./hooks.js`) mapping the `gateway:`
// interfaces to the fakes in `./gateway/`, so that code importing them (the SDK's bindings
// modules, or a plugin's own) loads under Node; the plugin's functions then reach the fakes
// through the SDK's host, as they reach the component's imports in the gateway.

import { register } from 'node:module';

import { installHost } from '../host.js';
import { state } from './gateway/state.js';

register('./hooks.js', import.meta.url);

const [http, sink, log, kv] = await Promise.all([
  import('gateway:provider/http@0.2.0'),
  import('gateway:provider/sink@0.2.0'),
  import('gateway:provider/log@0.2.0'),
  import('gateway:provider/kv@0.2.0'),
]);
// `http` and `sink` answer only during a run (and only in the worlds that import them); `log` and
// `kv` always, so that an SDK function called outside a run logs into `fakeHost.logs`.
installHost({ http, sink, log, kv });

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The route `base_url` of a `Call` that sets none. */
export const BASE_URL = 'http://upstream.test';

/** The fake host's state that outlives a run, for tests to read and reset. */
export const fakeHost = {
  /** Every line logged, `[level, message]`, runs or not (a run's own are `run.logs`). */
  get logs() {
    return state.logs;
  },
  /** The `kv` store: key -> `{value: Uint8Array, expires}` (ms since the epoch, `Infinity`). */
  get kv() {
    return state.kv;
  },
  /** What the plugin declared secret (`kv.secret`): `{value, ttlMs}`. */
  get secrets() {
    return state.secrets;
  },
  /** The least level `log.enabled` says is kept (default `trace`: every line). */
  setLogLevel(level) {
    state.level = level;
  },
  /** Forgets the log, the store and the secrets. */
  reset() {
    state.logs.length = 0;
    state.kv.clear();
    state.secrets.length = 0;
    state.level = 'trace';
  },
};

/** What a run did: the export's result, or its error, or the crash that ended it; and the rest. */
export class Run {
  constructor() {
    /** What the export returned (a completion, embeddings, a verdict, a tool result, tools). */
    this.result = undefined;
    /** The WIT error the export returned instead (`provider-error`, `tool-error`: `{tag, val}`). */
    this.error = undefined;
    /**
     * The line the SDK logged when the plugin threw something else than a `ProviderError` (a bug):
     * the gateway ends the instance and answers its `plugin_error`.
     */
    this.crash = undefined;
    /** @type {SentRequest[]} the requests the plugin sent, in order, a refused one too */
    this.sent = [];
    /** @type {object[]} the chunks the caller was sent (a stream) */
    this.chunks = [];
    /** @type {Uint8Array[]} the audio the caller was sent (`speak`), piece by piece */
    this.audio = [];
    /** @type {[string, string][]} the lines the run logged */
    this.logs = [];
  }

  /** The streamed text of `choice`, as the caller received it. */
  streamedText(choice = 0) {
    return this.chunks
      .flatMap((chunk) => chunk.deltas)
      .filter((delta) => delta.index === choice)
      .map((delta) => delta.text)
      .join('');
  }

  /** The audio the caller received (`speak`), whole. */
  streamedAudio() {
    const whole = new Uint8Array(this.audio.reduce((length, piece) => length + piece.length, 0));
    let at = 0;
    for (const piece of this.audio) {
      whole.set(piece, at);
      at += piece.length;
    }
    return whole;
  }

  /** The result; throws an `Error` saying why there is none (the error or the crash). */
  unwrap() {
    if (this.crash !== undefined) {
      throw new Error(`the plugin crashed: ${this.crash}`);
    }
    if (this.error !== undefined) {
      throw new Error(`the plugin returned an error: ${JSON.stringify(this.error, jsonable)}`);
    }
    return this.result;
  }
}

/** A request the plugin sent, as the gateway received it. */
export class SentRequest {
  constructor({ method, url, headers, body }) {
    this.method = method;
    this.url = url;
    /** @type {[string, string][]} */
    this.headers = headers.map(([name, value]) => [name, value]);
    /** @type {Uint8Array} */
    this.body = Uint8Array.from(body);
  }

  /** The value of the first header named `name` (case-insensitively). */
  headerValue(name) {
    const lower = name.toLowerCase();
    return this.headers.find(([n]) => n.toLowerCase() === lower)?.[1];
  }

  /** The body as text (UTF-8). */
  text() {
    return decoder.decode(this.body);
  }

  /** The body parsed as JSON. */
  json() {
    return JSON.parse(this.text());
  }
}

/**
 * An upstream's answer: `chunks` are the body's pieces as the plugin reads them (strings or bytes);
 * an `httpError(...)` among them fails that read (a stream cut short, a timeout).
 */
export function response(status, headers, chunks) {
  return { status, headers, chunks };
}

/** An answer of `status` whose body is `value` as JSON. */
export function json(status, value) {
  return response(status, [['content-type', 'application/json']], [JSON.stringify(value)]);
}

/** A 200 Server-Sent Events stream, one body chunk an event: each `data` a string, or JSON. */
export function sse(data) {
  const text = (d) => (typeof d === 'string' ? d : JSON.stringify(d));
  return response(200, [['content-type', 'text/event-stream']], data.map((d) => `data: ${text(d)}\n\n`));
}

/** A 200 newline-delimited JSON stream of `values`, one line and one body chunk each. */
export function ndjson(values) {
  return response(200, [['content-type', 'application/x-ndjson']], values.map((v) => `${JSON.stringify(v)}\n`));
}

/**
 * The failure of the gateway's HTTP import (the WIT's `http-error`: `timeout`, `transport`,
 * `too-large`, `invalid-request`, `forbidden-host`), to throw from an upstream or put in a body.
 */
export function httpError(tag, val) {
  return { payload: { tag, val: tag === 'too-large' ? BigInt(val) : val } };
}

/** A chat message (the WIT's `message`): `content` a string (one text part) or parts. */
export function message(role, content, extra = {}) {
  const parts = typeof content === 'string' ? [{ tag: 'text', val: content }] : content ?? [];
  return { role, parts, toolCalls: [], isError: false, ...extra };
}

/** A completion of one choice per text, as a guard's `checkResponse` is shown it. */
export function completion(texts, model = 'test-model') {
  return {
    model,
    choices: texts.map((text, index) => ({ index, text, reasoning: [], toolCalls: [] })),
  };
}

/** The builder of the request each export but `complete` and `completeStream` runs on. */
const BUILT_BY = { embed: 'Call.embedding', speak: 'Call.speech' };

/** A completion (or embeddings, or speech) request as the gateway passes a provider, and its runs. */
export class Call {
  /**
   * A `type: text` request for `prompt` to `model`, on a route `test` whose `base_url` is
   * `BASE_URL`, with no key, no settings, no params and no output limit.
   */
  static text(model, prompt) {
    return new Call({ ...completionRequest(model), prompt: { tag: 'text', val: prompt } });
  }

  /** A chat request to `model` (see `message`). */
  static chat(model, messages) {
    return new Call({ ...completionRequest(model), prompt: { tag: 'chat', val: messages } });
  }

  /** An embeddings request for `input` (texts) to `model`: run it with `embed`. */
  static embedding(model, input) {
    return new Call({ route: route(), model, input, params: '{}' });
  }

  /**
   * A speech request (`POST /v1/audio/speech`): `input` spoken by `model` in `voice`, as `format`
   * (`mp3`, `opus`, `aac`, `flac`, `wav` or `pcm`): run it with `speak`.
   */
  static speech(model, input, voice = 'alloy', format = 'mp3') {
    return new Call({ route: route(), model, input, voice, format, params: '{}' });
  }

  constructor(request) {
    /** The request as built: change what the builder does not reach (functions, reasoning...). */
    this.request = request;
    this.goneAfter = Infinity;
  }

  /** The route's `base_url`: the only origin the plugin may reach. */
  baseUrl(url) {
    this.request.route.baseUrl = url.replace(/\/+$/, '');
    return this;
  }

  /** The provider key (the route's, or the caller's `Provider-API-Key`). */
  apiKey(key) {
    this.request.route.apiKey = key;
    return this;
  }

  /** The route's `settings`, as the config's table would give them. */
  settings(settings) {
    this.request.route.settings = JSON.stringify(settings);
    return this;
  }

  /** A secret the route's settings name (`NAME_env`): `name` and its value. */
  secret(name, value) {
    this.request.route.secrets.push([name, value]);
    return this;
  }

  /** The caller's other params (`temperature`, `stop`...), an object. */
  params(params) {
    this.request.params = JSON.stringify(params);
    return this;
  }

  /** The output limit the gateway reserved for: `maxTokens` a choice (or none), and `choices`. */
  output(maxTokens, choices = 1) {
    this.request.output = { maxTokens: maxTokens ?? undefined, choices };
    return this;
  }

  /** The caller goes away after `count` chunks (pieces of audio): the sink refuses the next ones. */
  callerGoneAfter(count) {
    this.goneAfter = count;
    return this;
  }

  /** Runs the plugin's `complete` with `upstream` answering its requests. */
  complete(plugin, upstream) {
    return this.#run(plugin, 'complete', upstream);
  }

  /** Runs the plugin's `completeStream`; the chunks the caller was sent are `run.chunks`. */
  stream(plugin, upstream) {
    return this.#run(plugin, 'completeStream', upstream);
  }

  /** Runs the plugin's `embed` (on a `Call.embedding`). */
  embed(plugin, upstream) {
    return this.#run(plugin, 'embed', upstream);
  }

  /** Runs the plugin's `speak` (on a `Call.speech`); the audio the caller was sent is `run.audio`. */
  speak(plugin, upstream) {
    return this.#run(plugin, 'speak', upstream);
  }

  #run(plugin, name, upstream) {
    // The export a request that is no completion runs with: a speech has a voice, embeddings an
    // input (a completion has neither).
    const only = 'voice' in this.request ? 'speak' : 'input' in this.request ? 'embed' : undefined;
    if (only !== undefined && name !== only) {
      throw new TypeError(`a ${BUILT_BY[only]} runs with ${only}, not ${name}`);
    }
    if (only === undefined && name in BUILT_BY) {
      throw new TypeError(`${name} runs a ${BUILT_BY[name]}`);
    }
    const exported = exportOf(plugin, name, 'exportProvider');
    const allowed = origin(this.request.route.baseUrl);
    const request = structuredClone(this.request);
    return execute(
      'provider',
      (run) => ({
        http: fakeHttp(run, upstream, (url) => allowed !== undefined && origin(url) === allowed, 'the route\'s base_url is'),
        sink: (chunk) => {
          if (run.chunks.length >= this.goneAfter) {
            throw { payload: undefined };
          }
          run.chunks.push(structuredClone(chunk));
        },
        audio: (bytes) => {
          if (run.audio.length >= this.goneAfter) {
            throw { payload: undefined };
          }
          run.audio.push(Uint8Array.from(bytes));
        },
      }),
      () => exported(request),
    );
  }
}

/** A request as the gateway shows a guard (the WIT's `checked-request`), and its runs. */
export class GuardCall {
  /** A `type: text` completion request for `prompt`, to guard `test` on route `test`. */
  static prompt(prompt) {
    return new GuardCall({ tag: 'prompt', val: { tag: 'text', val: prompt } });
  }

  /** A chat request (see `message`). */
  static chat(messages) {
    return new GuardCall({ tag: 'prompt', val: { tag: 'chat', val: messages } });
  }

  /** An embeddings request for `texts`. */
  static embedding(texts) {
    return new GuardCall({ tag: 'embedding', val: texts });
  }

  constructor(input) {
    /** The request as built. */
    this.request = {
      guard: 'test',
      settings: '{}',
      route: 'test',
      model: 'test-model',
      input,
      functions: [],
      params: '{}',
    };
  }

  /** The guard's id (`[guards.ID]`). */
  guard(id) {
    this.request.guard = id;
    return this;
  }

  /** The route serving the request. */
  route(id) {
    this.request.route = id;
    return this;
  }

  model(model) {
    this.request.model = model;
    return this;
  }

  /** The guard's `settings`, as the config's table would give them. */
  settings(settings) {
    this.request.settings = JSON.stringify(settings);
    return this;
  }

  /** The caller's pass-through params, an object. */
  params(params) {
    this.request.params = JSON.stringify(params);
    return this;
  }

  /** Runs the plugin's `checkRequest`: `run.result` is the WIT's `request-verdict`. */
  checkRequest(plugin) {
    const exported = exportOf(plugin, 'checkRequest', 'exportGuard');
    const request = structuredClone(this.request);
    return execute('guard', () => ({}), () => exported(request));
  }

  /**
   * Runs the plugin's `checkResponse` on `answer` (a completion, or its choices' texts):
   * `run.result` is the WIT's `answer-verdict`.
   */
  checkResponse(plugin, answer) {
    const exported = exportOf(plugin, 'checkResponse', 'exportGuard');
    const request = structuredClone(this.request);
    const whole = Array.isArray(answer) ? completion(answer, this.request.model) : structuredClone(answer);
    return execute('guard', () => ({}), () => exported(request, whole));
  }
}

/** A call of a tool server (`[mcp_servers.ID]`, the WIT's `tool-context`), and its runs. */
export class ToolCall {
  /** The server `id` (default `test`), with no settings, no secrets and no allowed host. */
  static server(id = 'test') {
    return new ToolCall(id);
  }

  constructor(server = 'test') {
    /** The context as built. */
    this.context = { server, settings: '{}', secrets: [] };
    this.hosts = [];
  }

  /** The server's `settings`, as the config's table would give them. */
  settings(settings) {
    this.context.settings = JSON.stringify(settings);
    return this;
  }

  /** A secret the settings name (`NAME_env`): `name` and its value. */
  secret(name, value) {
    this.context.secrets.push([name, value]);
    return this;
  }

  /** Hosts (`api.example.com`, or with a port) the server's `allowed_hosts` let the tool reach. */
  allowHosts(...hosts) {
    this.hosts.push(...hosts.map((host) => host.toLowerCase()));
    return this;
  }

  /** Runs the plugin's `listTools`: `run.result` is the WIT's `tool-def`s. */
  listTools(plugin) {
    const exported = exportOf(plugin, 'listTools', 'exportTools');
    const context = structuredClone(this.context);
    return execute('tool', (run) => ({ http: this.#http(run, refuse) }), () => exported(context));
  }

  /**
   * Runs the plugin's `callTool` for tool `name` with `args` (an object, or JSON text) and
   * `upstream` answering its requests: `run.result` is the WIT's `tool-result`, `run.error` its
   * `tool-error`.
   */
  callTool(plugin, name, args, upstream = refuse) {
    const exported = exportOf(plugin, 'callTool', 'exportTools');
    const context = structuredClone(this.context);
    const text = typeof args === 'string' ? args : JSON.stringify(args ?? {});
    return execute('tool', (run) => ({ http: this.#http(run, upstream) }), () => exported(name, text, context));
  }

  #http(run, upstream) {
    return fakeHttp(run, upstream, (url) => this.hosts.includes(hostOf(url)), "the server's allowed_hosts are");
  }
}

/** An upstream for a run that expects no request. */
function refuse(request) {
  throw new Error(`the test gave no upstream, but the plugin sent ${request.method} ${request.url}`);
}

function completionRequest(model) {
  return {
    route: route(),
    model,
    functions: [],
    functionChoice: undefined,
    reasoning: undefined,
    output: { maxTokens: undefined, choices: 1 },
    params: '{}',
  };
}

function route() {
  return { id: 'test', baseUrl: BASE_URL, apiKey: undefined, settings: '{}', secrets: [] };
}

function exportOf(plugin, name, helper) {
  const exported = plugin?.[name];
  if (typeof exported !== 'function') {
    throw new TypeError(`the plugin exports no \`${name}\` function (export the functions ${helper} returns from its module)`);
  }
  return exported;
}

/** Runs `invoke` with the world's imports (`imports(run)`), and reads what it did. */
function execute(world, imports, invoke) {
  if (state.run) {
    throw new Error('a gateway-plugin-sdk/testing run inside another');
  }
  const run = new Run();
  state.run = { world, logs: run.logs, ...imports(run) };
  try {
    const value = invoke();
    if (value instanceof Promise) {
      // What the SDK's exports return on a bug (`crash`): a promise that never settles, after one
      // line at error level; the component then traps.
      value.catch(() => {});
      run.crash = run.logs.findLast(([level]) => level === 'error')?.[1] ?? 'the export returned a promise';
    } else {
      run.result = value;
    }
  } catch (thrown) {
    if (thrown === null || typeof thrown !== 'object' || !('payload' in thrown)) {
      throw thrown;
    }
    run.error = thrown.payload;
  } finally {
    state.run = null;
  }
  return run;
}

/** The gateway's `http.send` for `run`: recorded, refused unless `allowed(url)`, else `upstream`'s. */
function fakeHttp(run, upstream, allowed, reachable) {
  return (request) => {
    const sent = new SentRequest(request);
    run.sent.push(sent);
    if (!allowed(request.url)) {
      throw httpError('forbidden-host', hostOf(request.url) ?? request.url);
    }
    if (!upstream) {
      throw new Error(`the test gave no upstream, but the plugin sent ${request.method} ${request.url} (${reachable} reachable)`);
    }
    const answer = upstream(sent);
    if (!answer || typeof answer.status !== 'number' || !Array.isArray(answer.chunks)) {
      throw new TypeError('an upstream returns response(status, headers, chunks), json(...), sse(...) or ndjson(...)');
    }
    const chunks = [...answer.chunks];
    return {
      status: answer.status,
      headers: answer.headers ?? [],
      body: {
        read() {
          const next = chunks.shift();
          if (next !== null && typeof next === 'object' && 'payload' in next) {
            throw next;
          }
          return typeof next === 'string' ? encoder.encode(next) : next;
        },
        [Symbol.dispose]() {
          chunks.length = 0;
        },
      },
    };
  };
}

/** `host[:port]` of an absolute HTTP(S) `url`, lowercased, without a default port. */
function hostOf(url) {
  try {
    const parsed = new URL(url);
    return ['http:', 'https:'].includes(parsed.protocol) ? parsed.host : undefined;
  } catch {
    return undefined;
  }
}

/** `scheme://host[:port]` of an absolute HTTP(S) `url`, as the gateway compares them. */
function origin(url) {
  try {
    const parsed = new URL(url);
    return ['http:', 'https:'].includes(parsed.protocol) ? parsed.origin : undefined;
  } catch {
    return undefined;
  }
}

function jsonable(_key, value) {
  return typeof value === 'bigint' ? value.toString() : value;
}
