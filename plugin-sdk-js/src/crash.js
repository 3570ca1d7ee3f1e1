// An exception a plugin did not catch: a bug, which ends the call as a panic does in a Rust plugin.
// The gateway's log gets it once, as one line: the exception's type and message and the plugin's
// frames (the SDK's export wrapper and the bindings' below it are left out); then the instance
// ends, and the caller gets the gateway's stable `plugin_error` (502) with the invocation id, never
// the exception's text, which may quote anything the plugin was sent.

import { log } from './log.js';

/** The most frames logged, innermost first: the gateway cuts a log line at 4096 bytes. */
const MAX_FRAMES = 12;

/** The function each export calls the plugin through (`callPlugin(() => provider.complete(...))`):
 * its frame, the arrow's just above it and those below it are the SDK's and the bindings'. */
export const ENTRY = 'callPlugin';

/** Runs `run`, an arrow calling the plugin: see `ENTRY`. */
export function callPlugin(run) {
  return run();
}

/**
 * `${who} raised TYPE: message`, then the frames of the plugin's code, innermost first (as
 * SpiderMonkey writes them, `function@file:line:column`; its `stack` has no message).
 *
 * @param {unknown} error what was thrown
 * @param {string} [who]
 */
export function describe(error, who = 'plugin') {
  const isError = error instanceof Error;
  const kind = isError ? error.name : typeof error;
  const message = isError ? error.message : String(error);
  const lines = [`${who} raised ${kind}: ${message}`];
  const stack = isError && typeof error.stack === 'string' ? error.stack : '';
  const frames = [];
  for (const frame of stack.split('\n')) {
    const text = frame.trim();
    // SpiderMonkey's `name@file:line:column`, or V8's `at name (file:line:column)` (tests).
    if (text.startsWith(`${ENTRY}@`) || text.startsWith(`at ${ENTRY} `)) {
      // The frame above is the export's arrow.
      frames.pop();
      break;
    }
    if (text !== '' && !text.startsWith(`${kind}:`)) {
      frames.push(`  ${text}`);
    }
  }
  return lines.concat(frames.slice(0, MAX_FRAMES)).join('\n');
}

/**
 * Logs `error` at error level (`describe`) and returns what makes the export end the instance: a
 * promise that never settles. StarlingMonkey then aborts the call (a trap) after one line of its
 * own; throwing would instead have the bindings print a `TypeError` quoting the exception again.
 *
 * @param {unknown} error
 * @param {string} [who] what the log line blames: `guard` for a guard, as in the Python SDK
 * @returns {Promise<never>}
 */
export function crash(error, who = 'plugin') {
  try {
    log.error(describe(error, who));
  } catch {
    // Nothing more to do: the trap follows.
  }
  return new Promise(() => {});
}
