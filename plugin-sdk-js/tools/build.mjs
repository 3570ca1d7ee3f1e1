// Builds a JavaScript plugin into a WebAssembly component: bundles the plugin's module with the
// SDK and the world's bindings (rolldown) into the one ES module componentize-js takes, then makes
// the component (componentize-js, StarlingMonkey) for its world, without `wasi:http` (the gateway
// does not link it: a plugin's only way out is the world's `http` import).
//
//   node build.mjs --entry DIR/index.js --sdk plugin-sdk-js/src/index.js --wit wit
//                  [--world provider|tool] --work TMPDIR --out NAME.wasm
//
// The world is `--world`, else the `gateway.world` of the package.json beside the entry
// (`{"gateway": {"world": "tool"}}`), else `provider`.
//
// Run from a directory whose node_modules holds the pinned tools (`cargo xtask plugin js` copies
// it next to them). Prints one JSON line of figures (sizes, times) on success.

import { readFile, rename, writeFile, mkdir, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

import { componentize } from '@bytecodealliance/componentize-js';
import { componentWit } from '@bytecodealliance/jco';
import { rolldown } from 'rolldown';

const { values: args } = parseArgs({
  options: {
    entry: { type: 'string' },
    sdk: { type: 'string' },
    wit: { type: 'string' },
    world: { type: 'string' },
    work: { type: 'string' },
    out: { type: 'string' },
  },
});
for (const name of ['entry', 'sdk', 'wit', 'work', 'out']) {
  if (!args[name]) {
    console.error(`build.mjs: --${name} is required`);
    process.exit(2);
  }
}

// The worlds the SDK writes, each with its bindings module `src/wit-WORLD.js`.
const WORLDS = ['provider', 'tool'];

/** The `gateway.world` of the package.json `manifest`, if any. */
async function worldIn(manifest) {
  try {
    return JSON.parse(await readFile(manifest, 'utf8')).gateway?.world;
  } catch (error) {
    if (error.code !== 'ENOENT') {
      throw new Error(`${manifest}: ${error.message}`);
    }
  }
}

const world = args.world ?? (await worldIn(join(dirname(resolve(args.entry)), 'package.json'))) ?? 'provider';
if (!WORLDS.includes(world)) {
  console.error(`build.mjs: world \`${world}\`: the SDK writes ${WORLDS.join(' and ')} plugins (package.json's gateway.world)`);
  process.exit(2);
}

const started = performance.now();
await mkdir(args.work, { recursive: true });
// The world's bindings first, so that they are installed before the plugin's code runs.
const entryPath = join(resolve(args.work), 'entry.js');
const bindings = join(dirname(resolve(args.sdk)), `wit-${world}.js`);
await writeFile(entryPath, `import ${JSON.stringify(bindings)};\nexport * from ${JSON.stringify(resolve(args.entry))};\n`);
const bundlePath = join(resolve(args.work), 'bundle.js');
const bundle = await rolldown({
  input: entryPath,
  // The world's imports stay imports: componentize-js binds them.
  external: [/^gateway:/, /^wasi:/],
  platform: 'neutral',
  resolve: { alias: { 'gateway-plugin-sdk': resolve(args.sdk) } },
  logLevel: 'warn',
});
await bundle.write({ file: bundlePath, format: 'esm', sourcemap: false });
await bundle.close();
const bundled = performance.now();

const { component } = await componentize({
  sourcePath: bundlePath,
  witPath: resolve(args.wit),
  worldName: world,
  // `fetch` would need wasi:http, which the gateway does not link.
  disableFeatures: ['http', 'fetch-event'],
});
const componentized = performance.now();

// What the component imports, as `jco wit` prints it.
const imports = [...(await componentWit(component)).matchAll(/^\s*import ([^;]+);/gm)].map((m) => m[1]);
const forbidden = imports.filter((name) => name.startsWith('wasi:http'));
if (forbidden.length > 0) {
  console.error(`build.mjs: the component imports ${forbidden.join(', ')}, which the gateway does not link`);
  process.exit(1);
}

const out = resolve(args.out);
await mkdir(dirname(out), { recursive: true });
// A temporary name, then a rename: a gateway watching the directory never sees half a file.
const temporary = join(dirname(out), `.${Date.now()}.wasm.tmp`);
await writeFile(temporary, component);
await rename(temporary, out);
console.log(
  JSON.stringify({
    out,
    world,
    bundle_bytes: (await stat(bundlePath)).size,
    component_bytes: component.length,
    bundle_ms: Math.round(bundled - started),
    componentize_ms: Math.round(componentized - bundled),
    imports,
  }),
);
