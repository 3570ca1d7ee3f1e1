#!/usr/bin/env node
// `gateway-plugin build DIR [--out FILE] [--world provider|tool|guard] [--work DIR]`: builds the
// JavaScript plugin in DIR (its `index.js`, `index.mjs` or `index.ts`) into a WebAssembly
// component for the gateway, with this package's SDK and WIT, from any folder
// (`npx gateway-plugin build . --out my-plugin.wasm`). The default output is `DIR/NAME.wasm`, NAME
// being the package.json's name (without its scope), else the directory's. Prints one JSON line
// of figures (sizes, times, the component's imports) on success.

import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { BuildError, build } from '../tools/build.mjs';

const USAGE = 'usage: gateway-plugin build DIR [--out FILE] [--world provider|tool|guard] [--work DIR]';
const ENTRIES = ['index.js', 'index.mjs', 'index.ts'];
const PACKAGE = resolve(fileURLToPath(import.meta.url), '..', '..');

function fail(message, code = 1) {
  console.error(`gateway-plugin: ${message}`);
  process.exit(code);
}

let parsed;
try {
  parsed = parseArgs({
    allowPositionals: true,
    options: {
      out: { type: 'string' },
      world: { type: 'string' },
      work: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
} catch (error) {
  fail(`${error.message}\n${USAGE}`, 2);
}
const { values: options, positionals } = parsed;
if (options.help) {
  console.log(USAGE);
  process.exit(0);
}
if (positionals[0] !== 'build' || positionals.length !== 2) {
  fail(USAGE, 2);
}

const dir = resolve(positionals[1]);
const entry = ENTRIES.map((name) => join(dir, name)).find((path) => existsSync(path));
if (!entry) {
  fail(`${dir} has none of ${ENTRIES.join(', ')}`);
}

/** The plugin's name: its package.json's (without a scope), else its directory's. */
async function pluginName() {
  try {
    const name = JSON.parse(await readFile(join(dir, 'package.json'), 'utf8')).name;
    if (typeof name === 'string' && name !== '') {
      return name.replace(/^@[^/]+\//, '');
    }
  } catch (error) {
    if (error.code !== 'ENOENT') {
      fail(`${join(dir, 'package.json')}: ${error.message}`);
    }
  }
  return basename(dir);
}

const out = resolve(options.out ?? join(dir, `${await pluginName()}.wasm`));
// The bundle is the build's only by-product: a folder of its own, removed after, unless asked for.
const work = options.work ? resolve(options.work) : await mkdtemp(join(tmpdir(), 'gateway-plugin-'));
try {
  const figures = await build({
    entry,
    sdk: join(PACKAGE, 'src', 'index.js'),
    wit: join(PACKAGE, 'wit'),
    world: options.world,
    work,
    out,
  });
  console.log(JSON.stringify(figures));
} catch (error) {
  console.error(`gateway-plugin: ${error instanceof BuildError ? error.message : (error?.stack ?? String(error))}`);
  process.exitCode = 1;
} finally {
  if (!options.work) {
    await rm(work, { recursive: true, force: true });
  }
}
