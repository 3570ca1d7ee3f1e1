// The gateway's imports, as the component's bindings give them. `wit.js` fills this in when the
// plugin runs as a component; unit tests under Node install stand-ins with `installHost`.

/** @type {{http?: any, sink?: any, log?: any, kv?: any}} */
export const host = {};

/** Replaces some or all of the host's imports (for tests: stand-ins for the gateway). */
export function installHost(imports) {
  Object.assign(host, imports);
}

/** The import `name`, or an error saying the plugin does not run in the gateway. */
export function hostImport(name) {
  const found = host[name];
  if (!found) {
    throw new Error(`the gateway's ${name} import is only there when the plugin runs as a component`);
  }
  return found;
}
