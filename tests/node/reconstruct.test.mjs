// node --test: checks reconstruct.mjs against the fixtures and its failure modes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const script = join(here, 'reconstruct.mjs');
const fixtures = join(here, 'fixtures');

function run(input, args = []) {
  const result = spawnSync(process.execPath, [script, ...args], {
    input,
    encoding: 'utf8',
  });
  return {
    code: result.status,
    stderr: result.stderr,
    stdout: result.stdout,
    json: result.stdout.trim() ? JSON.parse(result.stdout) : undefined,
  };
}

for (const name of readdirSync(fixtures).filter(f => f.endsWith('.sse')).sort()) {
  test(`fixture ${name}`, () => {
    const body = readFileSync(join(fixtures, name));
    const expected = JSON.parse(
      readFileSync(join(fixtures, name.replace(/\.sse$/, '.json')), 'utf8'),
    );
    const { code, stderr, json } = run(body);
    assert.equal(code, 0, stderr);
    assert.deepStrictEqual(json, expected);
    // key order too (JSON.stringify of the SDK's objects)
    assert.equal(JSON.stringify(json), JSON.stringify(expected));
  });
}

test('CRLF line endings give the same result', () => {
  const body = readFileSync(join(fixtures, 'static-tools.sse'), 'utf8');
  const lf = run(body);
  const crlf = run(body.replace(/\n/g, '\r\n'));
  assert.equal(crlf.code, 0, crlf.stderr);
  assert.deepStrictEqual(crlf.json, lf.json);
});

test('empty body: no message, no chunks', () => {
  const { code, json } = run('');
  assert.equal(code, 0);
  assert.equal(json.message, null);
  assert.equal(json.chunks, 0);
  assert.equal(json.done, false);
});

test('invalid JSON in a data line exits 2 and names the event', () => {
  const { code, stdout, stderr } = run(
    'data: {"type":"start"}\n\ndata: {"type":"text-start",\n\ndata: [DONE]\n\n',
  );
  assert.equal(code, 2);
  assert.equal(stdout, '');
  assert.match(stderr, /event #1 .*AI_JSONParseError/);
});

test('chunk rejected by uiMessageChunkSchema exits 2', () => {
  const unknown = run('data: {"type":"bogus"}\n\n');
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /unknown chunk type "bogus"/);

  // optional fields must be omitted, not null
  const nullField = run('data: {"type":"start","messageId":null}\n\n');
  assert.equal(nullField.code, 2);
  assert.match(nullField.stderr, /chunk type "start": messageId: .*received null/);

  const badReason = run('data: {"type":"finish","finishReason":"end_turn"}\n\n');
  assert.equal(badReason.code, 2);
  assert.match(badReason.stderr, /finishReason/);
});

test('protocol violation exits 1 but still prints the JSON', () => {
  const body =
    'data: {"type":"start","messageId":"m"}\n\n' +
    'data: {"type":"text-delta","id":"nope","delta":"x"}\n\n' +
    'data: [DONE]\n\n';
  const strict = run(body);
  assert.equal(strict.code, 1);
  assert.match(strict.stderr, /missing text part/);
  assert.equal(strict.json.errors[0].source, 'stream');
  assert.equal(strict.json.errors[0].name, 'AI_UIMessageStreamError');
  assert.deepStrictEqual(strict.json.message, { id: 'm', role: 'assistant', parts: [] });

  const lenient = run(body, ['--allow-stream-errors']);
  assert.equal(lenient.code, 0);
});

test('an unterminated last event is dropped and flagged', () => {
  const { code, json } = run(
    'data: {"type":"start","messageId":"m"}\n\ndata: {"type":"text-start","id":"t"}',
  );
  assert.equal(code, 0);
  assert.equal(json.incompleteTail, true);
  assert.deepStrictEqual(json.chunkTypes, ['start']);
});

test('--message continues an earlier assistant message (resume)', t => {
  const initial = {
    id: 'm1',
    role: 'assistant',
    parts: [
      { type: 'step-start' },
      { type: 'tool-x', toolCallId: 'c1', state: 'input-available', input: {} },
    ],
  };
  const dir = mkdtempSync(join(tmpdir(), 'reconstruct-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'initial.json');
  writeFileSync(path, JSON.stringify(initial));
  const { code, stderr, json } = run(
    'data: {"type":"start","messageId":"m1"}\n\n' +
      'data: {"type":"tool-output-available","toolCallId":"c1","output":5}\n\n' +
      'data: [DONE]\n\n',
    ['--message', path],
  );
  assert.equal(code, 0, stderr);
  assert.deepStrictEqual(json.message.parts[1], {
    type: 'tool-x',
    toolCallId: 'c1',
    state: 'output-available',
    input: {},
    output: 5,
  });
});

test('--chat: useChat engine agrees, except that an error chunk ends the response', () => {
  const ok = run(readFileSync(join(fixtures, 'static-tools.sse')), ['--chat']);
  assert.equal(ok.code, 0, ok.stderr);
  assert.equal(ok.json.chat.status, 'ready');
  assert.deepStrictEqual(ok.json.chat.message, ok.json.message);
  assert.deepStrictEqual(ok.json.chat.onFinishMessage, ok.json.message);
  assert.equal(ok.json.chat.finishReason, 'stop');

  const err = run(readFileSync(join(fixtures, 'reset-data-error-abort.sse')), ['--chat']);
  assert.equal(err.code, 0, err.stderr);
  assert.equal(err.json.chat.status, 'error');
  assert.deepStrictEqual(err.json.chat.error, { name: 'Error', message: 'upstream model error' });
  // chunks after the error chunk (finish-step, start-step, abort, finish) are not applied
  assert.deepStrictEqual(err.json.chat.message, err.json.lastSnapshot);
  assert.equal(err.json.chat.finishReason, null);
});
