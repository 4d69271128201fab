// The chat page: pick an agent and a conversation, send messages, follow each turn's stream
// (with the AI SDK's readers, see stream.js), decide what a paused turn waits for, move
// between regenerated answers, search. State lives in the URL (/ui/{agent}/{conversation})
// and, for a turn being streamed, in sessionStorage, so a reload picks up where it was.

import { ApiError, json, apiKey, setApiKey } from './api.js';
import { el, isToolPart, messageNode, toolName } from './render.js';
import { forget, messages as snapshots, turnChunks } from './stream.js';

const config = JSON.parse(document.getElementById('think-config').textContent || '{}');
const $ = id => document.getElementById(id);
const ENDED = new Set(['completed', 'error', 'aborted', 'skipped', 'interrupted']);
// A client tool the page offers every agent: the model may ask the person a question.
const ASK_USER = {
  name: 'ask_user',
  description: 'Ask the person in the chat a question and get their answer.',
  input_schema: {
    type: 'object',
    properties: { question: { type: 'string', description: 'The question to ask' } },
    required: ['question'],
  },
};

const state = {
  agents: [],
  agent: null, // the agent object from /v1/agents
  cid: null,
  conversationExists: false,
  messages: [], // the active path, root first
  siblings: new Map(), // assistant message id -> {messages, active_index}
  live: null, // {turn, message, abort, pendingUser, hidden}
  highlight: null,
  ready: false, // the conversation is loaded: a message goes where the URL says
};

// -- errors a person can act on ------------------------------------------------------------

function showError(error) {
  if (error?.name === 'AbortError') return;
  const alert = $('alert');
  alert.textContent = error instanceof ApiError || error instanceof Error ? error.message : String(error);
  alert.hidden = false;
  if (error instanceof ApiError && error.status === 401) askForKey();
}

function clearError() {
  $('alert').hidden = true;
  $('alert').textContent = '';
}

async function attempt(action) {
  try {
    clearError();
    await action();
  } catch (error) {
    showError(error);
  }
}

function askForKey() {
  $('key-form').hidden = false;
  $('key-input').focus();
}

// -- paths -------------------------------------------------------------------------------

const base = () => `/v1/agents/${encodeURIComponent(state.agent.name)}`;
const conversationPath = () => `${base()}/conversations/${encodeURIComponent(state.cid)}`;

function pageUrl() {
  if (!state.agent) return '/ui';
  const agent = encodeURIComponent(state.agent.name);
  return state.cid ? `/ui/${agent}/${encodeURIComponent(state.cid)}` : `/ui/${agent}`;
}

function temporalLink(turn) {
  if (!config.temporal_ui_url || !turn.workflow_id) return null;
  const workflow = turn.workflow_id;
  const ns = encodeURIComponent(config.temporal_namespace || 'default');
  return `${config.temporal_ui_url}/namespaces/${ns}/workflows/${encodeURIComponent(workflow)}`;
}

function clientTools() {
  const taken = new Set((state.agent?.tools || []).map(t => t.name));
  return taken.has(ASK_USER.name) ? [] : [ASK_USER];
}

// -- agents and conversations --------------------------------------------------------------

async function boot() {
  $('key-button').hidden = !config.auth_required;
  if (config.auth_required && !apiKey()) {
    askForKey();
    return;
  }
  const [, , agentName, cid] = location.pathname.split('/').map(decodeURIComponent);
  state.agents = (await json('/v1/agents')).agents;
  const select = $('agent');
  select.replaceChildren(...state.agents.map(a => el('option', { value: a.name, text: a.name })));
  if (state.agents.length === 0) throw new Error('This gateway hosts no agent: set THINK_AGENTS.');
  let agent = state.agents.find(a => a.name === agentName);
  if (agentName && !agent) {
    agent = state.agents[0];
    await selectAgent(agent.name, null);
    const names = state.agents.map(a => a.name).join(', ');
    throw new Error(`There is no agent named "${agentName}" here. This gateway hosts: ${names}. Showing ${agent.name}.`);
  }
  await selectAgent((agent || state.agents[0]).name, cid || null);
}

async function selectAgent(name, cid) {
  stopLive();
  state.agent = state.agents.find(a => a.name === name);
  $('agent').value = name;
  const served = state.agent.served_by ? ` (answered by ${state.agent.served_by})` : '';
  const tools = state.agent.tools.map(t => t.name + (t.needs_approval ? ' (asks first)' : ''));
  $('agent-about').textContent =
    `${state.agent.description || state.agent.name}${served}` +
    (tools.length ? `. Tools: ${tools.join(', ')}.` : '.');
  const { conversations } = await json(`${base()}/conversations`);
  fillConversations(conversations, cid);
  await openConversation(cid || conversations[0]?.id || null, { push: false });
}

function fillConversations(conversations, cid) {
  const options = conversations.map(c =>
    el('option', { value: c.id, text: `${c.id} (${new Date(c.created_at).toLocaleString()})` }),
  );
  if (cid && !conversations.some(c => c.id === cid)) options.unshift(el('option', { value: cid, text: `${cid} (new)` }));
  if (options.length === 0) options.push(el('option', { value: '', text: 'none yet' }));
  $('conversation').replaceChildren(...options);
  $('conversation').value = cid || conversations[0]?.id || '';
}

async function newConversation() {
  const conv = await json(`${base()}/conversations`, { method: 'POST', body: {} });
  const { conversations } = await json(`${base()}/conversations`);
  fillConversations(conversations, conv.id);
  await openConversation(conv.id);
  $('input').focus();
}

async function openConversation(cid, { push = true } = {}) {
  stopLive();
  state.ready = false;
  state.cid = cid;
  state.conversationExists = false;
  state.highlight = null;
  state.messages = [];
  state.siblings = new Map();
  $('search-hits').hidden = true;
  setStatus(null);
  history[push ? 'pushState' : 'replaceState'](null, '', pageUrl());
  document.title = cid ? `${cid} · ${state.agent.name} · Think` : `${state.agent.name} · Think`;
  if (!cid) {
    state.ready = true;
    return render();
  }
  try {
    await json(conversationPath());
    state.conversationExists = true;
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 404)) throw error;
    state.conversationExists = false; // the first message creates it
  }
  if (state.conversationExists) {
    await refreshMessages();
    const { turns } = await json(`${conversationPath()}/turns`);
    // Oldest first among those not ended: the one the conversation's queue runs now.
    const active = turns.filter(t => !ENDED.has(t.status)).reverse();
    const current = active.find(t => t.status !== 'pending') || active[0];
    if (current) follow(current);
  }
  state.ready = true;
  render();
}

async function refreshMessages() {
  state.messages = (await json(`${conversationPath()}/messages`)).messages;
  const assistants = state.messages.filter(m => m.role === 'assistant');
  const found = await Promise.all(
    assistants.map(m => json(`${conversationPath()}/messages/${encodeURIComponent(m.id)}/siblings`)),
  );
  state.siblings = new Map(assistants.map((m, i) => [m.id, found[i]]));
}

// -- turns -------------------------------------------------------------------------------

async function send(text) {
  const body = { input: text, mode: 'submit', client_tools: clientTools() };
  const turn = await json(`${conversationPath()}/turns`, {
    method: 'POST',
    body,
    headers: { 'idempotency-key': crypto.randomUUID() },
  });
  if (!state.conversationExists) {
    state.conversationExists = true;
    const { conversations } = await json(`${base()}/conversations`);
    fillConversations(conversations, state.cid);
  }
  follow(turn, { pendingUser: { id: 'pending-user', role: 'user', parts: [{ type: 'text', text }] } });
}

async function regenerate(messageId) {
  const turn = await json(`${conversationPath()}/regenerate`, { method: 'POST', body: { message_id: messageId } });
  follow(turn, { hidden: messageId });
}

function stopLive() {
  state.live?.abort.abort();
  clearInterval(state.live?.poll);
  state.live = null;
}

// Stream one turn into the page until it ends, then show the conversation as stored.
function follow(turn, { pendingUser = null, hidden = null } = {}) {
  stopLive();
  state.highlight = null; // a search hit is not where a new answer goes
  const live = { turn, message: null, abort: new AbortController(), pendingUser, hidden, resumedFrom: null };
  state.live = live;
  // Not through attempt(): a poll must not clear an error the person has yet to read.
  live.poll = setInterval(() => pollStatus(live).catch(showError), 1000);
  setStatus(turn);
  render();
  const chunks = turnChunks(turn.stream_url, turn.turn_id, {
    signal: live.abort.signal,
    onEventId: id => (live.resumedFrom = id),
  });
  (async () => {
    try {
      const onError = error => {
        live.streamError = error.message;
        // An `error` chunk is the turn's own failure, shown in the status line; anything else
        // is the SDK refusing our stream, which must never happen (the browser tests fail on it).
        if (chunks.lastType !== 'error') console.error(`the AI SDK rejected the stream: ${error.message}`);
      };
      for await (const message of snapshots(chunks, onError)) {
        if (state.live !== live) return;
        live.message = message;
        renderLive();
      }
      if (state.live !== live) return;
      if (!chunks.complete) {
        if (live.abort.signal.aborted) return;
        throw new Error(
          live.streamError
            ? `The stream broke off: ${live.streamError}. Reload the page to resume it.`
            : 'The stream broke off. Reload the page to resume it where it was.',
        );
      }
      forget(turn.turn_id);
      clearInterval(live.poll);
      await pollStatus(live);
      await refreshMessages();
      state.live = null;
      render();
    } catch (error) {
      if (state.live !== live || error?.name === 'AbortError') return;
      clearInterval(live.poll);
      if (error instanceof ApiError) return showError(error);
      console.error(`the AI SDK rejected the stream: ${error?.message}`);
      showError(new Error(`This answer's stream could not be read (${error?.message}). Reload the page to try again.`));
    }
  })();
}

async function pollStatus(live) {
  if (state.live !== live) return;
  const turn = await json(live.turn.status_url);
  if (state.live !== live) return;
  const changed =
    turn.status !== live.turn.status ||
    JSON.stringify(turn.pending_client_tools) !== JSON.stringify(live.turn.pending_client_tools);
  live.turn = turn;
  setStatus(turn, live.streamError);
  if (changed) renderLive();
}

function setStatus(turn, streamError) {
  const panel = $('turn-status');
  if (!turn) {
    panel.hidden = true;
    return;
  }
  const words = {
    pending: 'is queued',
    running: 'is running',
    awaiting_approval: 'waits for your approval',
    awaiting_client_tool: 'waits for your answer',
    completed: 'completed',
    error: 'failed',
    aborted: 'was cancelled',
    skipped: 'was skipped',
    interrupted: 'was interrupted',
  };
  const link = temporalLink(turn);
  panel.dataset.status = turn.status;
  const parts = [
    el('span', { class: 'turn-id', text: `Turn ${turn.turn_id} ` }),
    el('strong', { class: 'turn-status', text: words[turn.status] || turn.status }),
    turn.error || streamError ? el('span', { class: 'error-text', text: `: ${turn.error || streamError}` }) : null,
    link ? ' · ' : null,
    link ? el('a', { href: link, target: '_blank', rel: 'noopener', text: 'its workflow in the Temporal UI' }) : null,
  ];
  panel.replaceChildren(...parts.filter(Boolean));
  panel.hidden = false;
  const live = state.live && state.live.turn.turn_id === turn.turn_id;
  $('cancel').hidden = !live || ENDED.has(turn.status);
}

async function decide(turn, approvalId, approved, reason) {
  const body = approved ? { approved } : { approved, ...(reason ? { reason } : {}) };
  await json(`${turn.status_url}/approvals/${encodeURIComponent(approvalId)}`, { method: 'POST', body });
}

async function answer(turn, part, text, isError) {
  let body;
  if (isError) body = { error: text || 'The person declined to answer.' };
  else if (toolName(part) === ASK_USER.name) body = { output: { answer: text } };
  else {
    try {
      body = { output: JSON.parse(text) };
    } catch {
      body = { output: text };
    }
  }
  await json(`${turn.status_url}/tool-results/${encodeURIComponent(part.toolCallId)}`, { method: 'POST', body });
}

// The controls for a part of the live message that waits for the person.
function liveActions(part) {
  const live = state.live;
  if (!live || !isToolPart(part)) return null;
  if (part.state === 'approval-requested' && part.approval?.id) {
    const reason = el('input', { type: 'text', placeholder: 'Why not? (optional, the model sees it)', 'aria-label': 'Reason for denying' });
    const act = approved => attempt(() => decide(live.turn, part.approval.id, approved, reason.value.trim()));
    return el(
      'div',
      { class: 'actions' },
      el('button', { type: 'button', class: 'approve', onclick: () => act(true), text: 'Approve' }),
      el('button', { type: 'button', class: 'deny', onclick: () => act(false), text: 'Deny' }),
      reason,
    );
  }
  const pending = (live.turn.pending_client_tools || []).some(p => p.tool_call_id === part.toolCallId);
  const ours = clientTools().some(t => t.name === toolName(part));
  if (part.state === 'input-available' && (pending || ours)) {
    const question = typeof part.input?.question === 'string' ? part.input.question : null;
    const field = el('textarea', { rows: 2, 'aria-label': question || `Result for ${toolName(part)}`, placeholder: question ? 'Your answer' : 'The result (JSON or text)' });
    const act = isError => attempt(() => answer(live.turn, part, field.value.trim(), isError));
    return el(
      'div',
      { class: 'actions' },
      question ? el('p', { class: 'question', text: question }) : null,
      field,
      el('button', { type: 'button', class: 'answer', onclick: () => act(false), text: 'Send answer' }),
      el('button', { type: 'button', class: 'decline', onclick: () => act(true), text: 'Decline' }),
    );
  }
  return null;
}

// -- rendering -----------------------------------------------------------------------------

function branchFooter(message, isLast) {
  if (message.role !== 'assistant') return null;
  const info = state.siblings.get(message.id);
  const controls = [];
  if (info && info.messages.length > 1) {
    const at = info.active_index;
    const go = index => attempt(() => switchTo(info.messages[index].id));
    controls.push(
      el(
        'span',
        { class: 'branches', role: 'group', 'aria-label': 'Answers to this message' },
        el('button', { type: 'button', class: 'previous', disabled: at === 0, 'aria-label': 'Previous answer', onclick: () => go(at - 1), text: '‹' }),
        el('span', { class: 'branch-position', text: `${at + 1} / ${info.messages.length}` }),
        el('button', { type: 'button', class: 'next', disabled: at === info.messages.length - 1, 'aria-label': 'Next answer', onclick: () => go(at + 1), text: '›' }),
      ),
    );
  }
  if (isLast && !state.live) {
    controls.push(el('button', { type: 'button', class: 'regenerate', onclick: () => attempt(() => regenerate(message.id)), text: 'Regenerate' }));
  }
  return controls.length ? el('div', { class: 'actions' }, ...controls) : null;
}

async function switchTo(leafId) {
  await json(`${conversationPath()}/active-leaf`, { method: 'PUT', body: { leaf_id: leafId } });
  await refreshMessages();
  render();
}

function visibleMessages() {
  let list = state.messages;
  const live = state.live;
  if (live) {
    const liveId = live.message?.id || live.turn.message_id;
    if (live.hidden) {
      const at = list.findIndex(m => m.id === live.hidden);
      if (at >= 0) list = list.slice(0, at);
    }
    list = list.filter(m => m.id !== liveId);
    const last = list.at(-1);
    const said = m => m.parts.map(p => p.text || '').join('');
    if (live.pendingUser && !(last?.role === 'user' && said(last) === said(live.pendingUser))) {
      list = [...list, live.pendingUser]; // until the stored path has it
    }
  }
  return list;
}

// Follow the conversation as it grows, unless the reader has scrolled up to read.
function keepingToTheEnd(change) {
  const end = document.documentElement.scrollHeight - innerHeight - scrollY < 120;
  change();
  if (end && !state.highlight) scrollTo(0, document.documentElement.scrollHeight);
}

function render() {
  keepingToTheEnd(renderAll);
}

function renderAll() {
  const list = visibleMessages();
  const lastAssistant = list.findLast(m => m.role === 'assistant');
  const nodes = list.map(m => messageNode(m, { footer: branchFooter(m, m === lastAssistant) }));
  $('messages').replaceChildren(...nodes);
  if (state.live) $('messages').append(liveNode());
  $('empty').hidden = list.length > 0 || !!state.live || !state.cid;
  $('send').disabled = !!state.live || !state.ready;
  $('send').title = state.live ? 'Wait for the answer, or cancel the turn' : '';
  $('search-form').hidden = !state.conversationExists;
  if (state.highlight) {
    const node = $('messages').querySelector(`[data-message-id="${CSS.escape(state.highlight)}"]`);
    node?.classList.add('highlight');
    node?.scrollIntoView({ block: 'center' });
  }
}

function liveNode() {
  const live = state.live;
  const message = live.message || { id: live.turn.message_id || 'live', role: 'assistant', parts: [] };
  const node = messageNode(message, { actions: liveActions });
  node.id = 'live';
  node.setAttribute('aria-busy', 'true');
  if (message.parts.length === 0) node.append(el('p', { class: 'text waiting', text: '…' }));
  return node;
}

function renderLive() {
  const current = $('live');
  if (!current || !state.live) return render();
  keepingToTheEnd(() => current.replaceWith(liveNode()));
}

// -- search --------------------------------------------------------------------------------

// A snippet is HTML with <mark> around the matches: rebuilt from its text and marks only.
function snippetNodes(html) {
  const doc = new DOMParser().parseFromString(`<p>${html}</p>`, 'text/html');
  return [...doc.body.firstChild.childNodes].map(n =>
    n.nodeName === 'MARK' ? el('mark', { text: n.textContent }) : document.createTextNode(n.textContent),
  );
}

async function search(q) {
  const { hits } = await json(`${conversationPath()}/search?q=${encodeURIComponent(q)}`);
  const list = $('search-hits');
  list.replaceChildren(
    ...(hits.length
      ? hits.map(hit =>
          el('li', {}, el('button', { type: 'button', class: 'hit', 'data-message-id': hit.message_id, onclick: () => attempt(() => showHit(hit.message_id)) }, `${hit.role}: `, ...snippetNodes(hit.snippet))),
        )
      : [el('li', { class: 'empty', text: `Nothing matches "${q}".` })]),
  );
  list.hidden = false;
}

async function showHit(messageId) {
  if (!state.messages.some(m => m.id === messageId)) {
    // On another branch: make the branch through it the active one.
    await json(`${conversationPath()}/active-leaf`, { method: 'PUT', body: { leaf_id: messageId } });
    await refreshMessages();
  }
  state.highlight = messageId;
  render();
}

// -- wiring --------------------------------------------------------------------------------

$('agent').addEventListener('change', e => attempt(() => selectAgent(e.target.value, null)));
$('conversation').addEventListener('change', e => attempt(() => openConversation(e.target.value || null)));
$('new-conversation').addEventListener('click', () => attempt(newConversation));
$('key-button').addEventListener('click', askForKey);
$('key-form').addEventListener('submit', e => {
  e.preventDefault();
  setApiKey($('key-input').value.trim());
  $('key-form').hidden = true;
  attempt(boot);
});
$('composer').addEventListener('submit', e => {
  e.preventDefault();
  const text = $('input').value.trim();
  if (!text || state.live || !state.ready) return;
  attempt(async () => {
    if (!state.cid) await newConversation();
    await send(text);
    $('input').value = '';
  });
});
$('input').addEventListener('keydown', e => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    $('composer').requestSubmit();
  }
});
$('cancel').addEventListener('click', () =>
  attempt(() => json(`${state.live.turn.status_url}/cancel`, { method: 'POST', body: { reason: 'cancelled in the chat page' } })),
);
$('search-form').addEventListener('submit', e => {
  e.preventDefault();
  state.highlight = null;
  attempt(() => search($('search-input').value.trim()));
});
window.addEventListener('popstate', () => location.reload());

attempt(boot);
