// The gateway's log: lines a plugin writes there, with the request's context around them.

import { host } from './host.js';

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error'];

/** Writes `message` at `level` through the host (to stderr when not running as a component). */
function write(level, message) {
  if (host.log) {
    host.log.log(level, message);
  } else if (LEVELS.indexOf(level) >= LEVELS.indexOf('warn')) {
    console.error(`[${level}] ${message}`);
  }
}

/**
 * The gateway's log. `enabled(level)` says whether a line at `level` would be kept, so a plugin can
 * skip building one that would be dropped. `console.log` and friends write here too.
 */
export const log = {
  trace: (message) => write('trace', message),
  debug: (message) => write('debug', message),
  info: (message) => write('info', message),
  warn: (message) => write('warn', message),
  error: (message) => write('error', message),
  /** @param {'trace' | 'debug' | 'info' | 'warn' | 'error'} level */
  enabled: (level) => (host.log ? host.log.enabled(level) : false),
};
