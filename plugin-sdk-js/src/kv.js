// State a plugin keeps between requests (each request has a fresh instance): an access token
// minted by one request, used by the next ones until it expires. Entries belong to the route and
// plugin of the call, live in one gateway process's memory and are bounded per route.

import { hostImport } from './host.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

export const kv = {
  /**
   * The bytes under `key`, unless they expired, were deleted or evicted.
   * @returns {Uint8Array | undefined}
   */
  get(key) {
    return hostImport('kv').get(key) ?? undefined;
  },

  /** The value under `key` as text (UTF-8). */
  getText(key) {
    const value = kv.get(key);
    return value === undefined ? undefined : decoder.decode(value);
  },

  /**
   * Keeps `value` (a string or bytes) under `key` for `ttlMs` milliseconds (0: until evicted).
   * @param {string} key
   * @param {string | Uint8Array} value
   * @param {number} [ttlMs]
   */
  set(key, value, ttlMs = 0) {
    const bytes = typeof value === 'string' ? encoder.encode(value) : value;
    hostImport('kv').set(key, bytes, BigInt(Math.max(0, Math.floor(ttlMs))));
  },

  delete(key) {
    hostImport('kv').delete(key);
  },

  /**
   * The text under `key`, or `refresh()`'s `{value, ttlMs}` kept there and returned: a token
   * minted once and reused until it expires.
   */
  getOrRefresh(key, refresh) {
    const kept = kv.getText(key);
    if (kept !== undefined) {
      return kept;
    }
    const { value, ttlMs } = refresh();
    kv.set(key, value, ttlMs);
    return value;
  },
};
