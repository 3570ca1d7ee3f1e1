// `gateway:provider/kv@0.2.0` under Node: one in-memory store for the test file's runs, as the
// gateway keeps a route's entries between its requests.
import { state } from './state.js';

export function get(key) {
  const entry = state.kv.get(key);
  if (entry && entry.expires <= Date.now()) {
    state.kv.delete(key);
    return undefined;
  }
  return entry?.value;
}

export function set(key, value, ttlMs) {
  const ttl = Number(ttlMs);
  state.kv.set(key, { value: Uint8Array.from(value), expires: ttl > 0 ? Date.now() + ttl : Infinity });
}

function remove(key) {
  state.kv.delete(key);
}
export { remove as delete };

export function secret(value, ttlMs) {
  // The gateway's bounds: a shorter or longer value is not taken, with a warning.
  const length = new TextEncoder().encode(value).length;
  if (length < 8 || length > 16 * 1024) {
    state.logs.push(['warn', `kv.secret: a value of ${length} bytes is not taken (8 bytes to 16 KiB)`]);
    return;
  }
  state.secrets.push({ value, ttlMs: Number(ttlMs) });
}
