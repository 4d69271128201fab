// Bundles page.jsx (React, useChat and both transports) into <outdir>/page.js for
// tests/protocols/test_use_chat.py: `node use-chat/build.mjs <outdir>`.
import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';

const outdir = process.argv[2];
if (!outdir) {
  console.error('usage: node use-chat/build.mjs <outdir>');
  process.exit(2);
}
await build({
  entryPoints: [fileURLToPath(new URL('./page.jsx', import.meta.url))],
  bundle: true,
  format: 'esm',
  jsx: 'automatic',
  minify: true,
  define: { 'process.env.NODE_ENV': '"production"' },
  outfile: `${outdir}/page.js`,
  logLevel: 'warning',
});
