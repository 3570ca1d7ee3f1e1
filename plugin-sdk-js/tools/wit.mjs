// The package's copy of the WIT and the TypeScript declarations generated from it, kept equal to
// the repository's `wit/` (a build from the installed package reads only the copy):
//
//   node tools/wit.mjs sync   [--package DIR] [--wit DIR]   copies the WIT, regenerates types/wit
//   node tools/wit.mjs check  [--package DIR] [--wit DIR]   fails if either is stale
//   node tools/wit.mjs check-copy [...]                     the copy only (needs no packages)
//
// `--package` is the SDK's directory (default: this script's parent), `--wit` the repository's
// WIT (default: the package's `../wit`; without one, as in an installed package, only the
// declarations are checked against the package's own copy).
//
// The declarations are jco's guest types (`jco guest-types`): the guest's view of each world, one
// ambient module per interface (`declare module 'gateway:provider/types@0.2.0'`), which is what
// the SDK's functions receive and return. They are made by the library rather than by the `jco`
// command: jco 1.35.0's command hands the generator (a WASI component) no preopened directory, so
// it cannot read any WIT path; the library lets us preopen `/` on the shim instance it uses.

import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const WORLDS = ['provider', 'tool', 'guard'];

const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: { package: { type: 'string' }, wit: { type: 'string' } },
});
const pkg = resolve(args.package ?? join(dirname(fileURLToPath(import.meta.url)), '..'));
const repoWit = args.wit ? resolve(args.wit) : join(pkg, '..', 'wit');
const copyDir = join(pkg, 'wit');
const typesDir = join(pkg, 'types', 'wit');

/** The `.wit` files of `dir` (the current line only: `frozen/` stays in the repository). */
async function witFiles(dir) {
  return (await readdir(dir)).filter((name) => name.endsWith('.wit')).sort();
}

/** Every file under `dir`, relative to it, with its text. */
async function tree(dir) {
  const files = new Map();
  const walk = async (at) => {
    for (const entry of await readdir(at, { withFileTypes: true })) {
      const path = join(at, entry.name);
      if (entry.isDirectory()) {
        await walk(path);
      } else {
        files.set(relative(dir, path), await readFile(path, 'utf8'));
      }
    }
  };
  if (existsSync(dir)) {
    await walk(dir);
  }
  return files;
}

/** Differences between two trees, as lines. */
function differences(expected, actual, what) {
  const lines = [];
  for (const [name, text] of expected) {
    if (!actual.has(name)) {
      lines.push(`${what}: ${name} is missing`);
    } else if (actual.get(name) !== text) {
      lines.push(`${what}: ${name} differs`);
    }
  }
  for (const name of actual.keys()) {
    if (!expected.has(name)) {
      lines.push(`${what}: ${name} should not be there`);
    }
  }
  return lines;
}

async function expectedCopy() {
  const files = new Map();
  for (const name of await witFiles(repoWit)) {
    files.set(name, await readFile(join(repoWit, name), 'utf8'));
  }
  return files;
}

/** The generated declarations of every world of the WIT in `wit`, by relative path. */
async function generate(wit) {
  const require = createRequire(import.meta.url);
  const transpile = createRequire(require.resolve('@bytecodealliance/jco')).resolve('@bytecodealliance/jco-transpile');
  const shim = createRequire(transpile).resolve('@bytecodealliance/preview2-shim/filesystem');
  (await import(pathToFileURL(shim).href))._setPreopens({ '/': '/' });
  const { generateGuestTypes } = await import(pathToFileURL(transpile).href);
  const files = new Map();
  const decoder = new TextDecoder();
  for (const world of WORLDS) {
    const generated = await generateGuestTypes(wit, { worldName: world, outDir: '/' });
    for (const [name, bytes] of Object.entries(generated)) {
      const text = decoder.decode(bytes);
      const path = relative('/', name);
      // The worlds share interfaces: each must come out the same from every world.
      if (files.has(path) && files.get(path) !== text) {
        throw new Error(`${path} differs between worlds`);
      }
      files.set(path, text);
    }
  }
  return files;
}

async function writeTree(dir, files) {
  await rm(dir, { recursive: true, force: true });
  for (const [name, text] of files) {
    await mkdir(dirname(join(dir, name)), { recursive: true });
    await writeFile(join(dir, name), text);
  }
}

const command = positionals[0];
const hasRepoWit = existsSync(repoWit);
if (command === 'sync') {
  if (!hasRepoWit) {
    throw new Error(`no WIT at ${repoWit} to copy`);
  }
  const copy = await expectedCopy();
  await mkdir(copyDir, { recursive: true });
  for (const name of await witFiles(copyDir)) {
    if (!copy.has(name)) {
      await rm(join(copyDir, name));
    }
  }
  for (const [name, text] of copy) {
    await writeFile(join(copyDir, name), text);
  }
  await writeTree(typesDir, await generate(copyDir));
  console.log(`wit.mjs: copied ${copy.size} WIT files into ${copyDir} and wrote the declarations into ${typesDir}`);
} else if (command === 'check' || command === 'check-copy') {
  const problems = [];
  if (hasRepoWit) {
    const actual = new Map();
    for (const name of await witFiles(copyDir)) {
      actual.set(name, await readFile(join(copyDir, name), 'utf8'));
    }
    problems.push(...differences(await expectedCopy(), actual, `the package's WIT copy (${copyDir})`));
  }
  if (command === 'check') {
    problems.push(...differences(await generate(copyDir), await tree(typesDir), `the declarations generated from the WIT (${typesDir})`));
  }
  if (problems.length > 0) {
    console.error(`${problems.join('\n')}\nwit.mjs: stale; run \`npm run sync-wit\` in plugin-sdk-js and commit the result`);
    process.exit(1);
  }
} else {
  console.error('usage: node tools/wit.mjs sync|check|check-copy [--package DIR] [--wit DIR]');
  process.exit(2);
}
