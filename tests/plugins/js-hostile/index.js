// A JavaScript plugin that never answers: every call loops until the gateway's CPU budget
// (`cpu_time_ms`) stops it. For the sandbox tests of JavaScript plugins (tests/e2e/js_plugins.rs).
import { exportProvider, usage } from 'gateway-plugin-sdk';

function spin() {
  let turns = 0;
  for (;;) {
    turns += 1;
  }
}

export const { info, complete, completeStream, embed } = exportProvider({
  info: () => ({ name: 'js-hostile', version: '0.1.0', models: [] }),
  complete: () => spin(),
  completeStream: () => spin(),
  embed: () => ({ model: 'none', vectors: [], usage: usage(0, 0) }),
});
