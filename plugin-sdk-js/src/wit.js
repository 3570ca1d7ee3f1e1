// The imports the `provider` and `tool` worlds share, handed to the SDK; `wit-WORLD.js` adds a
// world's own. The bundler keeps these specifiers as they are; componentize-js binds them to the
// host's functions, and cannot load one the world does not import (`sink` in a tool): hence a
// module per world, which the build puts first in the bundle (tools/build.mjs).
import * as http from 'gateway:provider/http@0.2.0';
import * as log from 'gateway:provider/log@0.2.0';
import * as kv from 'gateway:provider/kv@0.2.0';
import { installHost } from './host.js';

installHost({ http, log, kv });

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
