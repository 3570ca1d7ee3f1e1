// Builds a JavaScript plugin into a WebAssembly component: bundles the plugin's module with the
// SDK and the world's bindings (rolldown) into the one ES module componentize-js takes, then makes
// the component (componentize-js, StarlingMonkey) for its world, without `wasi:http` (the gateway
// does not link it: a plugin's only way out is the world's `http` import).
//
// The library of `gateway-plugin build` (bin/gateway-plugin.mjs), which `cargo xtask plugin js`
// runs too. The tools are imported from where this file is: the package's dependencies.

import { readFile, rename, writeFile, mkdir, stat } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';

import { componentize } from '@bytecodealliance/componentize-js';
import { componentWit } from '@bytecodealliance/jco';
import { rolldown } from 'rolldown';

// The worlds the SDK writes, each with its bindings module `src/wit-WORLD.js`.
export const WORLDS = ['provider', 'tool', 'guard'];

/** The `gateway.world` of the package.json `manifest`, if any. */
export async function worldIn(manifest) {
  try {
    return JSON.parse(await readFile(manifest, 'utf8')).gateway?.world;
  } catch (error) {
    if (error.code !== 'ENOENT') {
      throw new Error(`${manifest}: ${error.message}`);
    }
  }
}

/** A build that cannot succeed for a reason the author can fix (no stack trace needed). */
export class BuildError extends Error {}

/**
 * Builds `entry` (the plugin's module) with the SDK `sdk` (its `src/index.js`) for the WIT in
 * `wit` into the component `out`, using `work` for the bundle. The world is `world`, else the
 * `gateway.world` of the package.json beside the entry (`{"gateway": {"world": "tool"}}`), else
 * `provider`. Returns the build's figures (sizes, times, the component's imports).
 *
 * @param {{entry: string, sdk: string, wit: string, world?: string, work: string, out: string}} args
 */
export async function build(args) {
  const world = args.world ?? (await worldIn(join(dirname(resolve(args.entry)), 'package.json'))) ?? 'provider';
  if (!WORLDS.includes(world)) {
    throw new BuildError(`world \`${world}\`: the SDK writes ${WORLDS.join(', ')} plugins (package.json's gateway.world)`);
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
    throw new BuildError(`the component imports ${forbidden.join(', ')}, which the gateway does not link`);
  }

  const out = resolve(args.out);
  await mkdir(dirname(out), { recursive: true });
  // A temporary name, then a rename: a gateway watching the directory never sees half a file.
  const temporary = join(dirname(out), `.${Date.now()}.wasm.tmp`);
  await writeFile(temporary, component);
  await rename(temporary, out);
  return {
    out,
    world,
    bundle_bytes: (await stat(bundlePath)).size,
    component_bytes: component.length,
    bundle_ms: Math.round(bundled - started),
    componentize_ms: Math.round(componentized - bundled),
    imports,
  };
}
