// `make ui`: bundle the chat page into api/ui/, the package data the gateway serves at /ui.
// The output is deterministic for the same sources and locked packages; build.json records
// the SHA-256 of every source, so tests/test_ui_build.py can tell a stale build without Node
// (and, with Node, rebuilds into a temporary directory and compares byte for byte).
//
//   node ui/build.mjs [--out DIR]

import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const at = process.argv.indexOf('--out');
const out = at > 0 ? process.argv[at + 1] : join(here, '..', 'api', 'ui');

// Every file of ui/ but .npmrc, and of ui/src/: what the build depends on.
const filesOf = dir =>
  readdirSync(join(here, dir), { withFileTypes: true })
    .filter(entry => entry.isFile() && entry.name !== '.npmrc')
    .map(entry => (dir === '.' ? entry.name : `${dir}/${entry.name}`));
const SOURCES = [...filesOf('.'), ...filesOf('src')].sort();

mkdirSync(out, { recursive: true });
await esbuild.build({
  absWorkingDir: here,
  entryPoints: ['src/main.jsx'],
  jsx: 'automatic',
  define: { 'process.env.NODE_ENV': '"production"' },
  bundle: true,
  format: 'esm',
  target: 'es2022',
  platform: 'browser',
  minify: true,
  legalComments: 'eof',
  outfile: join(out, 'app.js'),
  logLevel: 'warning',
});
copyFileSync(join(here, 'index.html'), join(out, 'index.html'));
copyFileSync(join(here, 'style.css'), join(out, 'app.css'));
const sha = file => createHash('sha256').update(readFileSync(join(here, file))).digest('hex');
const versions = Object.fromEntries(
  ['ai', '@ai-sdk/react', 'react', 'react-dom', 'esbuild'].map(name => [
    name,
    JSON.parse(readFileSync(join(here, 'node_modules', name, 'package.json'), 'utf8')).version,
  ]),
);
const manifest = { sources: Object.fromEntries(SOURCES.map(f => [f, sha(f)])), versions };
writeFileSync(join(out, 'build.json'), JSON.stringify(manifest, null, 2) + '\n');
console.log(`ui: built ${relative(process.cwd(), out) || '.'} (ai ${versions.ai})`);
