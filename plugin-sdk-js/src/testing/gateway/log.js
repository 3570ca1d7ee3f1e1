// `gateway:provider/log@0.2.0` under Node: lines kept in memory, readable by the test.
import { state } from './state.js';

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error'];

export function enabled(level) {
  return LEVELS.indexOf(level) >= LEVELS.indexOf(state.level);
}

export function log(level, message) {
  if (!enabled(level)) {
    return;
  }
  state.logs.push([level, message]);
  state.run?.logs.push([level, message]);
}
