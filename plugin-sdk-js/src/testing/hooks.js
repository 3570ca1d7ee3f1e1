// A module-resolution hook (registered by `./index.js` with `module.register`): the `gateway:`
// interfaces a component imports, which only componentize-js can bind, resolve under Node to the
// fake host's modules in `./gateway/`. Any 0.2.x version of an interface is served, as the
// gateway links a plugin of any version of the line it serves.

const SERVED = /^gateway:provider\/(http|sink|log|kv|types|tool-types|guard-types)@0\.2\.\d+$/;

export async function resolve(specifier, context, next) {
  if (!specifier.startsWith('gateway:')) {
    return next(specifier, context);
  }
  const served = SERVED.exec(specifier);
  if (!served) {
    throw new Error(`${specifier}: gateway-plugin-sdk/testing fakes the gateway:provider@0.2.x interfaces only`);
  }
  const name = ['types', 'tool-types', 'guard-types'].includes(served[1]) ? 'types' : served[1];
  return { url: new URL(`./gateway/${name}.js`, import.meta.url).href, shortCircuit: true };
}
