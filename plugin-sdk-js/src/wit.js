// The imports every world has (`log`, `kv`), handed to the SDK; `wit-WORLD.js` adds a world's
// own. The bundler keeps these specifiers as they are; componentize-js binds them to the host's
// functions, and cannot load one the world does not import (`sink` in a tool, `http` in a guard):
// hence a module per world, which the build puts first in the bundle (tools/build.mjs).
import * as log from 'gateway:provider/log@0.2.0';
import * as kv from 'gateway:provider/kv@0.2.0';
import { installHost } from './host.js';

installHost({ log, kv });

// The host gives the plugin no stdout or stderr: `console` writes to the gateway's log instead.
const write = (level) => (...args) => {
  if (log.enabled(level)) {
    log.log(level, args.map((arg) => (typeof arg === 'string' ? arg : String(arg))).join(' '));
  }
};
for (const [method, level] of [
  ['trace', 'trace'],
  ['debug', 'debug'],
  ['log', 'info'],
  ['info', 'info'],
  ['warn', 'warn'],
  ['error', 'error'],
]) {
  globalThis.console[method] = write(level);
}
