// The gateway's request values read the ways providers want them: the caller's params, the
// prompt as messages, the route's settings and secrets; and the values a plugin gives back.

import { ProviderError } from './errors.js';

/**
 * `request.params` (every caller parameter the gateway does not read itself: `temperature`,
 * `max_tokens`, ...) as an object, without the keys in `owned` (those the plugin sets itself, so
 * that no caller param overrides them). Anything but a JSON object is `invalid-request`.
 *
 * @param {string} params
 * @param {string[]} [owned]
 * @returns {Record<string, unknown>}
 */
export function paramsObject(params, owned = []) {
  if (params.trim() === '') {
    return {};
  }
  let value;
  try {
    value = JSON.parse(params);
  } catch (error) {
    throw ProviderError.invalidRequest(`params is not valid JSON: ${error.message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw ProviderError.invalidRequest('params must be a JSON object');
  }
  for (const key of owned) {
    delete value[key];
  }
  return value;
}

/**
 * The prompt as a conversation: a chat's messages, or a text prompt as one user message (how chat
 * APIs take a text prompt).
 */
export function messages(prompt) {
  if (prompt.tag === 'chat') {
    return prompt.val;
  }
  return [{ role: 'user', parts: [{ tag: 'text', val: prompt.val }], toolCalls: [], isError: false }];
}

/** A message's text parts joined with `\n`; other parts are left out (see `textOnly`). */
export function messageText(message) {
  return message.parts
    .filter((part) => part.tag === 'text')
    .map((part) => part.val)
    .join('\n');
}

/**
 * `messageText` for a provider that takes only text: `invalid-request` naming `provider` when the
 * message has an image, audio or a document (reasoning parts are left out).
 */
export function textOnly(message, provider) {
  const media = message.parts.find((part) => part.tag !== 'text' && part.tag !== 'reasoning');
  if (media) {
    throw ProviderError.invalidRequest(`${provider} does not take ${media.tag} parts`);
  }
  return messageText(message);
}

/**
 * The route's `base_url` without surrounding whitespace or trailing slashes; an empty one is the
 * operator's mistake: `failed`, naming the route and saying to set it to `example`.
 */
export function checkedBaseUrl(route, example) {
  const base = route.baseUrl.trim().replace(/\/+$/, '');
  if (base === '') {
    throw ProviderError.failed(`route \`${route.id}\` has no base_url; set it to ${example}`);
  }
  return base;
}

/**
 * The route's plugin settings (the operator's `[providers.ID.settings]`) as an object, over
 * `defaults`. With `defaults`, a setting it does not name, or whose type differs from its
 * default's, is refused (`failed`, naming the route and the setting): a misspelt setting is an
 * error rather than silently ignored.
 *
 * @template {Record<string, unknown>} T
 * @param {{id: string, settings: string}} route
 * @param {T} [defaults]
 * @returns {T}
 */
export function routeSettings(route, defaults) {
  return settingsObject(route.settings, `route \`${route.id}\``, defaults);
}

/** `routeSettings` of any settings' JSON `text`, its errors naming `where` (`route \`ID\``). */
export function settingsObject(text, where, defaults) {
  let value;
  try {
    value = JSON.parse(text.trim() === '' ? '{}' : text);
  } catch (error) {
    throw ProviderError.failed(`${where}: settings: ${error.message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw ProviderError.failed(`${where}: settings must be a JSON object`);
  }
  if (defaults === undefined) {
    return value;
  }
  for (const [key, setting] of Object.entries(value)) {
    if (!Object.hasOwn(defaults, key)) {
      const known = Object.keys(defaults).join('`, `');
      throw ProviderError.failed(
        `${where}: unknown setting \`${key}\`${known ? `, expected one of \`${known}\`` : ''}`,
      );
    }
    const expected = kindOf(defaults[key]);
    if (defaults[key] !== null && defaults[key] !== undefined && kindOf(setting) !== expected) {
      throw ProviderError.failed(
        `${where}: setting \`${key}\`: expected a ${expected}, got a ${kindOf(setting)}`,
      );
    }
  }
  return { ...defaults, ...value };
}

function kindOf(value) {
  if (Array.isArray(value)) {
    return 'list';
  }
  return value === null ? 'null' : typeof value === 'object' ? 'table' : typeof value;
}

/**
 * The secret the route's settings name as `NAME_env` (or `NAME_file_env`, then `name` is
 * `NAME_file`): the value the host read from its environment when the route loaded, if set.
 */
export function secret(route, name) {
  const found = route.secrets.find(([n]) => n === name);
  return found?.[1];
}

/** A token count from a provider's JSON: a non-negative number, clamped to 32 bits; else none. */
function count(value) {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    return undefined;
  }
  return Math.min(Math.floor(value), 4294967295);
}

/** Usage of `prompt` and `completion` tokens, their sum as the total. */
export function usage(prompt, completion, total = prompt + completion) {
  return { promptTokens: prompt, completionTokens: completion, totalTokens: total };
}

/**
 * OpenAI's usage object (`prompt_tokens`, `completion_tokens`, `total_tokens`, with
 * `prompt_tokens_details.cached_tokens`, `completion_tokens_details.reasoning_tokens`) as the
 * gateway's usage, leniently (counts sent as `20.0` are fine, odd values count as missing);
 * `undefined` when `value` is not an object.
 */
export function openAiUsage(value) {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return undefined;
  }
  const prompt = count(value.prompt_tokens) ?? 0;
  const completion = count(value.completion_tokens) ?? 0;
  const result = usage(prompt, completion, count(value.total_tokens) ?? prompt + completion);
  const cached = count(value.prompt_tokens_details?.cached_tokens);
  const reasoning = count(value.completion_tokens_details?.reasoning_tokens);
  if (cached !== undefined) {
    result.cachedPromptTokens = cached;
  }
  if (reasoning !== undefined) {
    result.reasoningTokens = reasoning;
  }
  return result;
}

const FINISH_REASONS = {
  stop: 'stop',
  length: 'length',
  function_call: 'function-call',
  tool_calls: 'tool-calls',
  content_filter: 'content-filter',
};

/**
 * A finish reason as OpenAI-style APIs spell it (`stop`, `length`, `function_call`, `tool_calls`,
 * `content_filter`) as the WIT's `finish-reason`; any other spelling is `other`.
 */
export function finishReason(reason) {
  return { tag: FINISH_REASONS[reason] ?? 'other' };
}

/** A price list from `[model, inputPerMtok, outputPerMtok]` rows: `info().models`. */
export function modelPrices(rows) {
  return rows.map(([model, inputPerMtok, outputPerMtok]) => ({ model, inputPerMtok, outputPerMtok }));
}
