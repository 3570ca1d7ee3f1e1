// The fake host's state, shared by the fake interfaces and the harness: the running call's
// upstream, sink and log (none between runs), and what outlives a call (kv, declared secrets).

export const state = {
  /** @type {null | {world: string, http?: (request: object) => object, sink?: (chunk: object) => void, audio?: (bytes: Uint8Array) => void, logs: [string, string][]}} */
  run: null,
  /** Every line logged, runs or not. */
  logs: [],
  /** The least level kept (`log.enabled`). */
  level: 'trace',
  /** @type {Map<string, {value: Uint8Array, expires: number}>} key -> value, expiry (ms since the epoch; Infinity) */
  kv: new Map(),
  /** @type {{value: string, ttlMs: number}[]} what `kv.secret` declared */
  secrets: [],
};

/** The running call's import `name`, as the gateway refuses a world's missing import. */
export function during(name) {
  const run = state.run;
  if (!run) {
    throw new Error(
      `the gateway's ${name} import is only there while gateway-plugin-sdk/testing runs a plugin's export (Call, GuardCall, ToolCall)`,
    );
  }
  const found = run[name];
  if (!found) {
    throw new Error(`a ${run.world} plugin has no ${name} import`);
  }
  return found;
}
