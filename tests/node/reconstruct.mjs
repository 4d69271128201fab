#!/usr/bin/env node
// Rebuild the assistant UIMessage from a raw UI-message-stream SSE body with the
// AI SDK's own client code (parseJsonEventStream + uiMessageChunkSchema +
// readUIMessageStream), so the Python tests can compare it with what the
// server stored.
//
// Usage:
//   node tests/node/reconstruct.mjs [--message initial.json] [--allow-stream-errors] [--snapshots] [--chat] < body.sse
//
// stdin : the response body, bytes exactly as sent over HTTP
//         (`id: N\ndata: {json}\n\n` events, `: ping` comments, `data: [DONE]`).
// stdout: one JSON object (details in docs/ai-sdk-ui-message.md):
//   {
//     "message":  <final UIMessage | null>,  // live processing state at end of stream
//     "chunks":   <number of parsed chunks>,
//     "errors":   [{"source": "error-chunk"|"stream", "name", "message"}],
//     "finishReason": <last finish chunk's finishReason | null>,
//     "done":     <true if a `data: [DONE]` event was seen>,
//     "incompleteTail": <true if the body ends inside an event (no blank line
//                       after it); SSE clients drop such an event>,
//     "chunkTypes": [<type of each chunk, in order>],
//     "snapshotDiffers": <bool>,            // last readUIMessageStream snapshot != message
//     "lastSnapshot": <UIMessage>,          // only present when snapshotDiffers
//     "snapshots": [<UIMessage>, ...],      // only with --snapshots: every snapshot
//                                           // readUIMessageStream yielded, JSON round-tripped
//     "chat": {message, onFinishMessage, status, error, finishReason}
//                                           // only with --chat: the same body run through
//                                           // useChat's engine (AbstractChat + DefaultChatTransport)
//   }
//
// Exit codes:
//   0  ok (error chunks from the server are reported in "errors" but are not a failure)
//   1  the AI SDK's stream processing threw (protocol violation, e.g. text-delta
//      without text-start, or tool-output for an unknown toolCallId); the JSON is
//      still printed on stdout. --allow-stream-errors turns this into exit 0.
//   2  the body could not be parsed (bad JSON in a data: line, a chunk that fails
//      uiMessageChunkSchema, unreadable --message file, bad arguments); nothing on stdout.

import { readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import {
  AbstractChat,
  DefaultChatTransport,
  parseJsonEventStream,
  readUIMessageStream,
  uiMessageChunkSchema,
} from 'ai';

function fail(code, text) {
  process.stderr.write(`reconstruct.mjs: ${text}\n`);
  process.exit(code);
}

function parseArgs(argv) {
  const opts = {
    message: undefined,
    allowStreamErrors: false,
    snapshots: false,
    chat: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--allow-stream-errors') {
      opts.allowStreamErrors = true;
    } else if (arg === '--snapshots') {
      opts.snapshots = true;
    } else if (arg === '--chat') {
      opts.chat = true;
    } else if (arg === '--message') {
      const path = argv[++i];
      if (path == null) fail(2, '--message needs a file path');
      try {
        opts.message = JSON.parse(readFileSync(path, 'utf8'));
      } catch (error) {
        fail(2, `cannot read --message ${path}: ${error.message}`);
      }
    } else if (arg === '-h' || arg === '--help') {
      process.stdout.write(
        'usage: node reconstruct.mjs [--message initial.json] [--allow-stream-errors] [--snapshots] [--chat] < body.sse\n',
      );
      process.exit(0);
    } else {
      fail(2, `unknown argument ${JSON.stringify(arg)}`);
    }
  }
  if (opts.chat && opts.message) fail(2, '--chat cannot be combined with --message');
  return opts;
}

async function readStdin() {
  const parts = [];
  for await (const part of process.stdin) parts.push(part);
  return new Uint8Array(Buffer.concat(parts));
}

function describeError(error) {
  if (error instanceof Error) {
    return { name: error.name, message: error.message };
  }
  return { name: typeof error, message: String(error) };
}

function truncate(text, max = 300) {
  if (typeof text !== 'string') text = JSON.stringify(text);
  return text.length > max ? `${text.slice(0, max)}...` : text;
}

// A short, readable reason for a failed ParseResult. uiMessageChunkSchema is a
// zod union, whose raw error lists every branch; keep only the branch(es)
// whose `type` matched.
function explainParseError(error) {
  const name = error?.name ?? 'Error';
  if (name === 'AI_JSONParseError') {
    return `${name}: invalid JSON: ${truncate(error.cause?.message ?? error.message, 500)}\n  data: ${truncate(error.text, 2000)}`;
  }
  const value = error?.value;
  const data = value !== undefined ? `\n  data: ${truncate(JSON.stringify(value), 2000)}` : '';
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    return `${name}: a chunk must be a JSON object with a "type"${data}`;
  }
  const issue = error?.cause?.issues?.[0];
  if (issue?.code === 'invalid_union' && Array.isArray(issue.errors)) {
    const matching = issue.errors.filter(
      branch => !branch.some(i => i.path?.length === 1 && i.path[0] === 'type'),
    );
    if (matching.length === 0) {
      return `${name}: unknown chunk type ${JSON.stringify(value?.type)}${data}`;
    }
    const reasons = [
      ...new Set(
        matching.map(branch =>
          branch.map(i => `${(i.path ?? []).join('.') || '<root>'}: ${i.message}`).join(', '),
        ),
      ),
    ].join(' | ');
    return `${name}: chunk type ${JSON.stringify(value?.type)}: ${reasons}${data}`;
  }
  return `${name}: ${truncate(error?.message ?? String(error), 2000)}${data}`;
}

// Parse the whole body with the SDK's SSE + schema parser. Same pipeline as
// DefaultChatTransport.processResponseStream, which throws on the first
// unsuccessful ParseResult; here that is reported with the offending data.
async function parseBody(bytes) {
  const stream = new ReadableStream({
    start(controller) {
      if (bytes.length > 0) controller.enqueue(bytes);
      controller.close();
    },
  });
  const chunks = [];
  const reader = parseJsonEventStream({
    stream,
    schema: uiMessageChunkSchema,
  }).getReader();
  let index = 0;
  while (true) {
    const { done, value } = await reader.read();
    if (done) break;
    if (!value.success) {
      fail(
        2,
        `SSE data event #${index} (0-based, [DONE] excluded) is not a valid UI message chunk: ` +
          explainParseError(value.error),
      );
    }
    chunks.push(value.value);
    index++;
  }
  return chunks;
}

function sawDone(text) {
  return /^data: ?\[DONE\]\r?$/m.test(text);
}

// SSE only dispatches an event at a blank line: an unterminated last event is
// silently dropped by every SSE client (and so by this harness).
function hasIncompleteTail(text) {
  const normalized = text.replace(/\r\n?/g, '\n');
  const end = normalized.lastIndexOf('\n\n');
  const tail = end === -1 ? normalized : normalized.slice(end + 2);
  return tail.trim() !== '';
}

// useChat's engine: AbstractChat + DefaultChatTransport, fed the body through a
// fake fetch. Differs from readUIMessageStream in that an `error` chunk (or any
// processing error) ends the response: later chunks are not applied.
class HarnessChatState {
  status = 'ready';
  error = undefined;
  messages = [];
  snapshot = thing => structuredClone(thing);
  pushMessage = message => {
    this.messages = this.messages.concat(this.snapshot(message));
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (index, message) => {
    this.messages = [
      ...this.messages.slice(0, index),
      this.snapshot(message),
      ...this.messages.slice(index + 1),
    ];
  };
}

class HarnessChat extends AbstractChat {
  constructor(options) {
    super({ ...options, state: new HarnessChatState() });
  }
}

async function runChat(bytes) {
  let finish;
  let ids = 0;
  const chat = new HarnessChat({
    id: 'harness-chat',
    generateId: () => `client-generated-id-${ids++}`,
    transport: new DefaultChatTransport({
      api: 'http://harness.invalid/api/chat',
      fetch: async () =>
        new Response(bytes, {
          headers: { 'content-type': 'text/event-stream' },
        }),
    }),
    onFinish: options => {
      finish = options;
    },
    onError: () => {},
  });
  await chat.sendMessage({ text: 'harness' });
  const last = chat.messages.at(-1);
  return {
    // what useChat shows/keeps in `messages` (snapshot at the last write)
    message: last?.role === 'assistant' ? JSON.parse(JSON.stringify(last)) : null,
    // what onFinish({message}) receives (live state at the end)
    onFinishMessage:
      finish?.message != null ? JSON.parse(JSON.stringify(finish.message)) : null,
    status: chat.status,
    error: chat.error ? describeError(chat.error) : null,
    finishReason: finish?.finishReason ?? null,
  };
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const bytes = await readStdin();
  const chunks = await parseBody(bytes);
  const bodyText = new TextDecoder().decode(bytes);

  // readUIMessageStream keeps its processing state private and only yields
  // snapshots, taken when a chunk calls write(). Chunks that change the
  // message without writing (notably a trailing `start-step`) are then only in
  // the live state, which is what the SDK's own persistence hook
  // (createUIMessageStream/toUIMessageStream onEnd -> responseMessage) and
  // useChat's onFinish({message}) see. To observe that live state we hand
  // readUIMessageStream an empty assistant message shaped exactly like the one
  // createStreamingUIMessageState would create; it is mutated in place unless a
  // `start` chunk with a different messageId resets the state.
  const firstStart = chunks.find(c => c.type === 'start');
  const startIds = new Set(
    chunks
      .filter(c => c.type === 'start' && c.messageId != null)
      .map(c => c.messageId),
  );
  const live =
    opts.message ??
    {
      id: firstStart?.messageId ?? '',
      metadata: undefined,
      role: 'assistant',
      parts: [],
    };
  const liveId = live.role === 'assistant' ? live.id : undefined;
  const liveTrusted =
    live.role === 'assistant' &&
    [...startIds].every(id => id === liveId);

  const errors = [];
  let lastSnapshot = null;
  const errorChunkTexts = chunks
    .filter(c => c.type === 'error')
    .map(c => c.errorText);
  let errorChunksSeen = 0;

  const chunkStream = new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });

  const messages = readUIMessageStream({
    message: live,
    stream: chunkStream,
    onError: error => {
      // `error` chunks arrive here as `new Error(errorText)`; anything else is
      // an exception thrown by processUIMessageStream (it ends processing).
      const isErrorChunk =
        errorChunksSeen < errorChunkTexts.length &&
        error instanceof Error &&
        error.name === 'Error' &&
        error.message === errorChunkTexts[errorChunksSeen];
      if (isErrorChunk) errorChunksSeen++;
      errors.push({
        source: isErrorChunk ? 'error-chunk' : 'stream',
        ...describeError(error),
      });
    },
  });
  const snapshots = [];
  for await (const snapshot of messages) {
    lastSnapshot = snapshot;
    if (opts.snapshots) snapshots.push(JSON.parse(JSON.stringify(snapshot)));
  }

  // JSON round trip: drops keys whose value is undefined, exactly as the wire
  // / a JSON store would.
  const toJson = value => (value == null ? null : JSON.parse(JSON.stringify(value)));
  const snapshotJson = toJson(lastSnapshot);
  let messageJson;
  if (chunks.length === 0 && opts.message == null) {
    messageJson = null; // empty body: no message at all
  } else if (liveTrusted) {
    messageJson = toJson(live);
  } else {
    messageJson = snapshotJson;
  }

  let finishReason = null;
  for (const chunk of chunks) {
    if (chunk.type === 'finish' && chunk.finishReason != null) {
      finishReason = chunk.finishReason;
    }
  }

  const snapshotDiffers = !isDeepStrictEqual(messageJson, snapshotJson);
  const result = {
    message: messageJson,
    chunks: chunks.length,
    errors,
    finishReason,
    done: sawDone(bodyText),
    incompleteTail: hasIncompleteTail(bodyText),
    chunkTypes: chunks.map(c => c.type),
    snapshotDiffers,
  };
  if (snapshotDiffers) result.lastSnapshot = snapshotJson;
  if (opts.snapshots) result.snapshots = snapshots;
  if (opts.chat) result.chat = await runChat(bytes);

  process.stdout.write(`${JSON.stringify(result)}\n`);

  const streamErrors = errors.filter(e => e.source === 'stream');
  if (streamErrors.length > 0 && !opts.allowStreamErrors) {
    process.stderr.write(
      `reconstruct.mjs: the AI SDK rejected the chunk stream: ` +
        streamErrors.map(e => `${e.name}: ${e.message}`).join('; ') +
        '\n',
    );
    process.exitCode = 1;
  }
}

main().catch(error => fail(2, `unexpected failure: ${error?.stack ?? error}`));
