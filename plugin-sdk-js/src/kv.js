// State a plugin keeps between requests (each request has a fresh instance): an access token
// minted by one request, used by the next ones until it expires. Entries belong to the route and
// plugin of the call, live in one gateway process's memory and are bounded per route. A credential
// the plugin mints is also declared with `secret`, so that the gateway redacts it from what the
// route's requests answer, record and log; `getOrRefresh` does both.

import { hostImport } from './host.js';

/** How long after its time to live a value `getOrRefresh` minted is still redacted. */
export const SECRET_GRACE_MS = 15 * 60 * 1000;

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
   * Declares `value` a secret of the route for `ttlMs` milliseconds (0: until the route's
   * plugins have declared 64 newer ones): from now on, this request included, the gateway
   * replaces it with `[redacted]` in everything the route's requests answer, record and log.
   * Call it for every credential the plugin mints and sends upstream. A value shorter than 8
   * bytes or longer than 16 KiB is not taken (the gateway logs a warning).
   * @param {string} value
   * @param {number} [ttlMs]
   */
  secret(value, ttlMs = 0) {
    hostImport('kv').secret(value, BigInt(Math.max(0, Math.floor(ttlMs))));
  },

  /**
   * The text under `key`, or `refresh()`'s `{value, ttlMs}`: declared secret for its lifetime
   * and `SECRET_GRACE_MS` more, kept for `ttlMs` (0: until evicted) and returned: a
   * token minted once and reused until it expires.
   */
  getOrRefresh(key, refresh) {
    const kept = kv.getText(key);
    if (kept !== undefined) {
      return kept;
    }
    const { value, ttlMs } = refresh();
    kv.secret(value, ttlMs > 0 ? ttlMs + SECRET_GRACE_MS : 0);
    kv.set(key, value, ttlMs);
    return value;
  },
};
