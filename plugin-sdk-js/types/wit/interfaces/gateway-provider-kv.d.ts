declare module 'gateway:provider/kv@0.2.0' {
  /**
   * The value under `key`, unless it expired, was deleted or was evicted.
   */
  export function get(key: string): Uint8Array | undefined;
  /**
   * Keeps `value` under `key` for `ttl-ms` milliseconds (0: until evicted),
   * replacing what was there. An entry larger than the route's byte bound is
   * not kept.
   */
  export function set(key: string, value: Uint8Array, ttlMs: bigint): void;
  export { _delete as delete };
  function _delete(key: string): void;
  /**
   * Declares `value` a secret of the route for `ttl-ms` milliseconds (0: until the
   * route's plugins have declared 64 newer ones): from now on, this request included,
   * the host replaces it with `[redacted]` in everything the route's requests answer
   * (plain or streamed), record and log, as it does the route's configured keys and the
   * caller's. For every credential a plugin mints (an OAuth access token), whether or not
   * it is kept here. A value shorter than 8 bytes or longer than 16 KiB is not taken
   * (the host logs a warning).
   */
  export function secret(value: string, ttlMs: bigint): void;
}
