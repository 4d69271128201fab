// useChat's transport: the AI SDK's own `DefaultChatTransport` pointed at the gateway's chat
// route (`POST /v1/agents/{agent}/chat`, `GET …/chat/{id}/stream`), with a `fetch` around it
// that does three things the page needs and useChat does not:
//
// - it keeps the turn each response streams (its `x-workflow-run-id`), so that Stop can
//   cancel the turn on the server (useChat's `stop()` only drops the request) and the status
//   line can follow it;
// - it keeps the stream's events in sessionStorage as they arrive, so that a reload asks the
//   gateway only for what this tab has not seen (`?startIndex=N`) and hands useChat the saved
//   events followed by the rest: the answer is rebuilt from its first chunk, nothing shown
//   twice, nothing asked for twice;
// - it turns an HTTP error into an ApiError whose message says what to do (api.js).
import { DefaultChatTransport } from 'ai';
import { ApiError, explain, headers } from './api.js';

const PREFIX = 'think.chat.'; // + conversation id -> {turn, lastId, text}

function load(chatId) {
  if (unsaved.has(chatId)) return { ...unsaved.get(chatId) }; // newer than what is stored
  try {
    const saved = JSON.parse(sessionStorage.getItem(PREFIX + chatId) || 'null');
    return saved && typeof saved.text === 'string' && saved.lastId != null ? saved : null;
  } catch {
    return null;
  }
}

export function forget(chatId) {
  unsaved.delete(chatId);
  sessionStorage.removeItem(PREFIX + chatId);
}

// Saving the whole text on every chunk would cost O(n²) for a long answer: it is saved at most
// every SAVE_EVERY ms, and when the page is hidden or unloaded. What is saved is always whole
// events with the id of the last one, so a reload in between resumes from there.
const SAVE_EVERY = 250;
const unsaved = new Map();

function flush() {
  for (const [chatId, state] of unsaved) {
    try {
      sessionStorage.setItem(PREFIX + chatId, JSON.stringify(state));
    } catch {
      // Storage full: a reload then replays the turn from its first chunk instead.
    }
  }
  unsaved.clear();
}

function saveSoon(chatId, state) {
  if (unsaved.size === 0) setTimeout(flush, SAVE_EVERY);
  unsaved.set(chatId, { ...state });
}

addEventListener('pagehide', flush);
document.addEventListener('visibilitychange', () => document.hidden && flush());

// The response body, passed through unchanged, with each whole SSE event noted as it goes by.
function recording(response, chatId, turn, saved, onChunkType) {
  const state = saved && saved.turn === turn ? saved : { turn, lastId: null, text: '' };
  const decoder = new TextDecoder();
  let pending = '';
  const note = bytes => {
    pending += decoder.decode(bytes, { stream: true });
    let end;
    while ((end = pending.indexOf('\n\n')) >= 0) {
      const event = pending.slice(0, end + 2);
      pending = pending.slice(end + 2);
      const id = /^id: ?(.*)$/m.exec(event)?.[1];
      const data = /^data: ?(.*)$/m.exec(event)?.[1];
      if (data && data !== '[DONE]') {
        try {
          onChunkType(JSON.parse(data).type);
        } catch {
          // not JSON: the SDK's reader says so
        }
      }
      if (id == null || (state.lastId != null && Number(id) <= state.lastId)) continue; // kept already
      state.text += event;
      state.lastId = Number(id);
      saveSoon(chatId, state);
    }
  };
  const body = response.body.pipeThrough(
    new TransformStream({
      transform(chunk, controller) {
        note(chunk);
        controller.enqueue(chunk);
      },
    }),
  );
  return new Response(body, { status: response.status, headers: response.headers });
}

// A stream that is the saved events first, then the gateway's.
function prepended(text, response) {
  const head = new TextEncoder().encode(text);
  const reader = response.body.getReader();
  let sent = false;
  const body = new ReadableStream({
    async pull(controller) {
      if (!sent) {
        sent = true;
        controller.enqueue(head);
        return;
      }
      const { done, value } = await reader.read();
      if (done) controller.close();
      else controller.enqueue(value);
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
  return new Response(body, { status: response.status, headers: response.headers });
}

async function checked(response, init) {
  if (response.ok) return response;
  let problem = null;
  try {
    problem = await response.json();
  } catch {
    // not JSON: a proxy's page, say; the status still says enough
  }
  const method = init?.method || 'GET';
  throw new ApiError(response.status, explain(response.status, problem, method, new URL(response.url).pathname), problem);
}

async function reach(url, init) {
  try {
    return await fetch(url, init);
  } catch (error) {
    if (error?.name === 'AbortError') throw error;
    throw new ApiError(
      0,
      `The API at ${location.origin} is not answering (${error?.message || error}). ` +
        'Is `think dev` (or `think api`) still running? Reload this page once it is.',
    );
  }
}

// `onTurn(turnId)`: a response streams this turn. `onChunkType(type)`: each chunk's type.
export function chatTransport({ agent, chatId, body, onTurn, onChunkType }) {
  const api = `/v1/agents/${encodeURIComponent(agent)}/chat`;
  const streamPath = `${api}/${encodeURIComponent(chatId)}/stream`;
  const fetchThrough = async (input, init) => {
    const url = String(input);
    const resuming = (init?.method || 'GET') === 'GET';
    // A resume (GET) or a continuation after a pause (POST) of the turn this tab has kept the
    // events of adds to them; a new turn starts afresh.
    const saved = load(chatId);
    let response = await checked(await reach(url, init), init);
    if (response.status === 204) {
      forget(chatId);
      return response;
    }
    let turn = response.headers.get('x-workflow-run-id');
    if (resuming && saved && turn !== saved.turn && url.includes('startIndex')) {
      // Another turn than the one this tab saw: that one is over; this one from its start.
      response.body?.cancel();
      response = await checked(await reach(streamPath, init), init);
      if (response.status === 204) return response;
      turn = response.headers.get('x-workflow-run-id');
    }
    if (turn) onTurn(turn);
    const same = saved && saved.turn === turn;
    const recorded = recording(response, chatId, turn, same ? saved : null, onChunkType);
    return resuming && same ? prepended(saved.text, recorded) : recorded;
  };
  return new DefaultChatTransport({
    api,
    headers: () => headers(),
    body,
    fetch: fetchThrough,
    // Resume a reload from the event after the last one this tab saved, when it saved some.
    prepareReconnectToStreamRequest: ({ headers: sent }) => {
      const saved = load(chatId);
      const from = saved ? `?startIndex=${saved.lastId + 1}` : '';
      return { api: `${streamPath}${from}`, headers: sent };
    },
  });
}
