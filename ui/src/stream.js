// A turn's UI message stream, read with the AI SDK's own pieces: the SSE parser its
// transports use (eventsource-parser), its chunk schema (uiMessageChunkSchema) and its
// message reader (readUIMessageStream). What is added here is what a page needs beyond the
// SDK's fetch transport: the `id:` of every event, kept in sessionStorage with the chunks
// seen so far, so that after a reload the page replays those chunks and asks the gateway
// only for the rest (`Last-Event-ID`): the answer completes, nothing is shown twice.

import { asSchema, readUIMessageStream, uiMessageChunkSchema } from 'ai';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import { request } from './api.js';

const chunkSchema = asSchema(uiMessageChunkSchema);
const PREFIX = 'think.stream.';

function load(turnId) {
  try {
    const saved = JSON.parse(sessionStorage.getItem(PREFIX + turnId) || 'null');
    return saved && Array.isArray(saved.chunks) ? saved : null;
  } catch {
    return null;
  }
}

function save(turnId, state) {
  try {
    sessionStorage.setItem(PREFIX + turnId, JSON.stringify(state));
  } catch {
    // Storage full: a reload will then replay the turn from its first chunk instead.
  }
}

// Saving the whole list on every chunk would cost O(n²) for a long answer: it is saved at
// most every SAVE_EVERY ms, and when the page is hidden or unloaded. What is saved is always a
// prefix of the chunks with the id of its last one, so a reload in between resumes from
// there: a few chunks are asked for again, none is lost or shown twice.
const SAVE_EVERY = 250;
const unsaved = new Map(); // turn id -> state waiting to be saved

function flush() {
  for (const [turnId, state] of unsaved) save(turnId, state);
  unsaved.clear();
}

function saveSoon(turnId, state) {
  if (unsaved.size === 0) setTimeout(flush, SAVE_EVERY);
  unsaved.set(turnId, state); // chunks and lastId change together, so any moment is consistent
}

addEventListener('pagehide', flush);
document.addEventListener('visibilitychange', () => document.hidden && flush());

export function forget(turnId) {
  unsaved.delete(turnId);
  sessionStorage.removeItem(PREFIX + turnId);
}

// The chunks of one turn, from the first: those this tab saw before a reload, then the
// gateway's from `Last-Event-ID` on. Ends after `[DONE]` (and sets `complete`).
export function turnChunks(streamUrl, turnId, { signal, onEventId } = {}) {
  const saved = load(turnId) || { lastId: null, chunks: [] };
  let events;
  const stream = new ReadableStream({
    async start(controller) {
      for (const chunk of saved.chunks) controller.enqueue(chunk);
      const extra = saved.lastId == null ? {} : { 'last-event-id': String(saved.lastId) };
      const response = await request(streamUrl, { signal, headers: extra });
      onEventId?.(saved.lastId, saved.lastId != null);
      events = response.body
        .pipeThrough(new TextDecoderStream())
        .pipeThrough(new EventSourceParserStream())
        .getReader();
    },
    async pull(controller) {
      for (;;) {
        const { done, value } = await events.read();
        if (done || value.data === '[DONE]') {
          stream.complete = true;
          controller.close();
          return;
        }
        const checked = await chunkSchema.validate(JSON.parse(value.data));
        if (!checked.success) {
          controller.error(new Error(`the stream sent a chunk the AI SDK rejects: ${value.data}`));
          return;
        }
        stream.lastType = checked.value.type;
        saved.chunks.push(checked.value);
        if (value.id) saved.lastId = value.id;
        saveSoon(turnId, saved);
        controller.enqueue(checked.value);
        return;
      }
    },
    cancel() {
      return events?.cancel();
    },
  });
  // True once the gateway ended the stream. The SDK's reader ends quietly when its input
  // fails (a reload aborting the request, a dropped connection): this tells the two apart.
  stream.complete = false;
  return stream;
}

// Each snapshot of the assistant message as the chunks arrive (the SDK's reader).
export function messages(chunks, onError) {
  return readUIMessageStream({ stream: chunks, onError, terminateOnError: false });
}
