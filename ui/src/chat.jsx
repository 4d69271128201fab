// One conversation, on the AI SDK's own `useChat`, with the gateway's chat route as its
// transport (transport.js): the page is the reference client of that route. useChat holds
// the messages and streams each answer; the page adds what the route leaves to its client:
// the stored branch as the initial messages (and again, by `setMessages`, once a turn ends or
// the person moves to another branch), the turn's status line (polled by its id), Stop that
// also cancels the turn on the server, approvals and client tools through
// `addToolApprovalResponse`/`addToolOutput`, regenerate, branches and search.
import { useChat } from '@ai-sdk/react';
import {
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from 'ai';
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from 'react';
import { json } from './api.js';
import { Composer } from './composer.jsx';
import { Message, isToolPart, toolName } from './message.jsx';
import { chatTransport, forget } from './transport.js';

export const ENDED = new Set(['completed', 'error', 'aborted', 'skipped', 'interrupted']);

// A client tool the page offers every agent: the model may ask the person a question.
export const ASK_USER = {
  name: 'ask_user',
  description: 'Ask the person in the chat a question and get their answer.',
  input_schema: {
    type: 'object',
    properties: { question: { type: 'string', description: 'The question to ask' } },
    required: ['question'],
  },
};

const WORDS = {
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

function clientTools(agent) {
  const taken = new Set((agent.tools || []).map(t => t.name));
  return taken.has(ASK_USER.name) ? [] : [ASK_USER];
}

export const conversationPath = (agent, cid) =>
  `/v1/agents/${encodeURIComponent(agent)}/conversations/${encodeURIComponent(cid)}`;

// The conversation's active branch, and for each answer on it the answers beside it.
export async function loadPath(agent, cid) {
  const path = conversationPath(agent, cid);
  const { messages } = await json(`${path}/messages`);
  const assistants = messages.filter(m => m.role === 'assistant');
  const found = await Promise.all(
    assistants.map(m => json(`${path}/messages/${encodeURIComponent(m.id)}/siblings`)),
  );
  return { messages, siblings: new Map(assistants.map((m, i) => [m.id, found[i]])) };
}

function temporalLink(turn, config) {
  if (!config.temporal_ui_url || !turn.workflow_id) return null;
  const ns = encodeURIComponent(config.temporal_namespace || 'default');
  return `${config.temporal_ui_url}/namespaces/${ns}/workflows/${encodeURIComponent(turn.workflow_id)}`;
}

function TurnStatus({ turn, streamError, config }) {
  if (!turn) return <section id="turn-status" className="status" aria-live="polite" hidden />;
  const link = temporalLink(turn, config);
  const why = turn.error || streamError;
  return (
    <section id="turn-status" className="status" aria-live="polite" data-status={turn.status}>
      <span className="turn-id">{`Turn ${turn.turn_id} `}</span>
      <strong className="turn-status">{WORDS[turn.status] || turn.status}</strong>
      {why && <span className="error-text">{`: ${why}`}</span>}
      {link && (
        <>
          {' · '}
          <a href={link} target="_blank" rel="noopener">
            its workflow in the Temporal UI
          </a>
        </>
      )}
    </section>
  );
}

function Approval({ onDecide, disabled }) {
  const [reason, setReason] = useState('');
  return (
    <div className="actions">
      <button type="button" className="approve" disabled={disabled} onClick={() => onDecide(true, '')}>
        Approve
      </button>
      <button type="button" className="deny" disabled={disabled} onClick={() => onDecide(false, reason.trim())}>
        Deny
      </button>
      <input
        type="text"
        placeholder="Why not? (optional, the model sees it)"
        aria-label="Reason for denying"
        value={reason}
        onChange={e => setReason(e.target.value)}
      />
    </div>
  );
}

function ClientToolAnswer({ part, onAnswer, disabled }) {
  const [text, setText] = useState('');
  const question = typeof part.input?.question === 'string' ? part.input.question : null;
  return (
    <div className="actions">
      {question && <p className="question">{question}</p>}
      <textarea
        rows={2}
        aria-label={question || `Result for ${toolName(part)}`}
        placeholder={question ? 'Your answer' : 'The result (JSON or text)'}
        value={text}
        onChange={e => setText(e.target.value)}
      />
      <button type="button" className="answer" disabled={disabled} onClick={() => onAnswer(text.trim(), false)}>
        Send answer
      </button>
      <button type="button" className="decline" disabled={disabled} onClick={() => onAnswer(text.trim(), true)}>
        Decline
      </button>
    </div>
  );
}

function Branches({ info, onGo }) {
  const at = info.active_index;
  const count = info.messages.length;
  return (
    <span className="branches" role="group" aria-label="Answers to this message">
      <button type="button" className="previous" disabled={at === 0} aria-label="Previous answer" onClick={() => onGo(at - 1)}>
        ‹
      </button>
      <span className="branch-position">{`${at + 1} / ${count}`}</span>
      <button type="button" className="next" disabled={at === count - 1} aria-label="Next answer" onClick={() => onGo(at + 1)}>
        ›
      </button>
    </span>
  );
}

// A search snippet is HTML with <mark> around the matches: rebuilt from its text and marks only.
function Snippet({ html }) {
  const doc = new DOMParser().parseFromString(`<p>${html}</p>`, 'text/html');
  return [...doc.body.firstChild.childNodes].map((n, i) =>
    n.nodeName === 'MARK' ? <mark key={i}>{n.textContent}</mark> : n.textContent,
  );
}

export function Chat({ agent, cid, exists: existed, initial, initialSiblings, activeTurn, firstText, config, report, clear, onStarted }) {
  const path = conversationPath(agent.name, cid);
  const [turnId, setTurnId] = useState(activeTurn);
  const [turn, setTurn] = useState(null);
  const [settled, setSettled] = useState(null); // the turn id whose end the page has shown
  const [siblings, setSiblings] = useState(initialSiblings);
  const [highlight, setHighlight] = useState(null);
  const [hits, setHits] = useState(null);
  const [query, setQuery] = useState('');
  const [input, setInput] = useState('');
  const [exists, setExists] = useState(existed);
  const [streamError, setStreamError] = useState(null);
  const lastChunk = useRef(null);
  const decisions = useRef(new Map()); // approval id -> what this person decided
  const atEnd = useRef(true);
  const listed = useRef(existed);
  const onStartedRef = useRef(onStarted);
  onStartedRef.current = onStarted;
  const turnRef = useRef(turnId);
  turnRef.current = turnId;

  const transport = useMemo(
    () =>
      chatTransport({
        agent: agent.name,
        chatId: cid,
        body: { client_tools: clientTools(agent) },
        onTurn: id => {
          setTurnId(id);
          setStreamError(null);
          if (!listed.current) {
            listed.current = true; // the POST has made the conversation: list it
            onStartedRef.current();
          }
        },
        onChunkType: type => (lastChunk.current = type),
      }),
    [agent, cid],
  );
  const { messages, setMessages, sendMessage, status, stop, regenerate, addToolApprovalResponse, addToolOutput } = useChat({
    id: cid,
    messages: initial,
    transport,
    resume: true,
    sendAutomaticallyWhen: options =>
      lastAssistantMessageIsCompleteWithApprovalResponses(options) ||
      lastAssistantMessageIsCompleteWithToolCalls(options),
    onError: error => {
      if (error?.name === 'AbortError') return;
      if (error?.name === 'ApiError') return report(error);
      // An `error` chunk is the turn's own failure, shown in the status line; anything else is
      // the SDK refusing our stream, which must never happen (the browser tests fail on it).
      if (lastChunk.current === 'error') return setStreamError(error?.message || null);
      console.error(`the AI SDK rejected the stream: ${error?.message}`);
      report(new Error(`This answer's stream could not be read (${error?.message}). Reload the page to try again.`));
    },
  });
  const busy = status === 'submitted' || status === 'streaming';
  const turnOpen = turnId != null && settled !== turnId && !(turn?.turn_id === turnId && ENDED.has(turn.status));
  const live = busy || turnOpen;

  // Follow the turn's status while it has not ended (the status line, what it waits for).
  useEffect(() => {
    if (turnId == null) return undefined;
    let gone = false;
    let timer = null;
    const poll = async () => {
      try {
        const found = await json(`${path}/turns/${encodeURIComponent(turnId)}`);
        if (gone) return;
        setTurn(found);
        if (ENDED.has(found.status)) return;
      } catch (error) {
        if (gone) return;
        report(error);
      }
      timer = setTimeout(poll, 1000);
    };
    poll();
    return () => {
      gone = true;
      clearTimeout(timer);
    };
  }, [turnId, path, report]);

  // Show the stored branch (by setMessages) and say when a decision was overtaken.
  const refresh = async () => {
    const stored = await loadPath(agent.name, cid);
    setMessages(stored.messages);
    setSiblings(stored.siblings);
    for (const message of stored.messages) {
      for (const part of message.parts) {
        const mine = part.approval?.id != null ? decisions.current.get(part.approval.id) : undefined;
        if (mine === undefined) continue;
        const theirs = part.state === 'output-denied' ? false : part.approval.approved;
        if (theirs !== undefined && theirs !== mine) {
          report(
            new Error(
              `Conflict: this approval was decided elsewhere (${theirs ? 'approved' : 'denied'}) before your decision landed. ` +
                'Reload the conversation to see where it stands.',
            ),
          );
        }
        decisions.current.delete(part.approval.id);
      }
    }
  };

  // Once the turn has ended and useChat has read all of it: the conversation as stored.
  useEffect(() => {
    if (turnId == null || settled === turnId || busy) return;
    if (!(turn?.turn_id === turnId && ENDED.has(turn.status))) return;
    setSettled(turnId);
    forget(cid);
    if (!existed) onStarted(); // by its title, now that it has one
    refresh().catch(report);
  }, [turn, turnId, busy, settled]); // eslint-disable-line react-hooks/exhaustive-deps

  // The first message of a conversation the page has just created for it.
  useEffect(() => {
    if (firstText) send(firstText);
  }, []); // eslint-disable-line react-hooks/exhaustive-deps

  // Follow the conversation as it grows, unless the reader has scrolled up to read.
  useEffect(() => {
    const note = () => (atEnd.current = document.documentElement.scrollHeight - innerHeight - scrollY < 120);
    addEventListener('scroll', note, { passive: true });
    return () => removeEventListener('scroll', note);
  }, []);
  useLayoutEffect(() => {
    if (atEnd.current && !highlight) scrollTo(0, document.documentElement.scrollHeight);
  }, [messages, highlight]);
  useEffect(() => {
    if (highlight) document.querySelector(`[data-message-id="${CSS.escape(highlight)}"]`)?.scrollIntoView({ block: 'center' });
  }, [highlight, messages]);

  const cancel = async () => {
    clear();
    try {
      await stop();
      let id = turnRef.current;
      if (id == null) {
        const { turns } = await json(`${path}/turns`);
        id = turns.find(t => !ENDED.has(t.status))?.turn_id;
      }
      if (id != null) {
        await json(`${path}/turns/${encodeURIComponent(id)}/cancel`, { method: 'POST', body: { reason: 'cancelled in the chat page' } });
      }
    } catch (error) {
      report(error);
    }
  };
  const cancelRef = useRef(cancel);
  cancelRef.current = live ? cancel : null;
  // Esc cancels the turn being streamed, wherever the focus is.
  useEffect(() => {
    const onKey = e => e.key === 'Escape' && cancelRef.current?.();
    document.addEventListener('keydown', onKey);
    return () => document.removeEventListener('keydown', onKey);
  }, []);
  useEffect(() => () => void stop(), []); // eslint-disable-line react-hooks/exhaustive-deps

  function send(text) {
    clear();
    setHighlight(null); // a search hit is not where a new answer goes
    lastChunk.current = null;
    sendMessage({ text });
    setExists(true);
  }

  const act = async action => {
    clear();
    try {
      await action();
    } catch (error) {
      report(error);
    }
  };

  const switchTo = leafId =>
    act(async () => {
      await json(`${path}/active-leaf`, { method: 'PUT', body: { leaf_id: leafId } });
      await refresh();
    });

  const search = q =>
    act(async () => {
      setHighlight(null);
      const found = await json(`${path}/search?q=${encodeURIComponent(q)}`);
      setHits({ q, hits: found.hits });
    });

  const showHit = messageId =>
    act(async () => {
      if (!messages.some(m => m.id === messageId)) {
        // On another branch: make the branch through it the active one.
        await json(`${path}/active-leaf`, { method: 'PUT', body: { leaf_id: messageId } });
        await refresh();
      }
      setHighlight(messageId);
    });

  // The controls for a part of the live answer that waits for the person. Shown as soon as
  // the part asks, usable once the response has ended at the pause: useChat sends a decision
  // (sendAutomaticallyWhen) only when it is not streaming.
  const actions = part => {
    if (!turnOpen || !isToolPart(part)) return null;
    if (part.state === 'approval-requested' && part.approval?.id) {
      const decide = (approved, reason) =>
        act(async () => {
          decisions.current.set(part.approval.id, approved);
          await addToolApprovalResponse({ id: part.approval.id, approved, ...(reason ? { reason } : {}) });
        });
      return <Approval onDecide={decide} disabled={busy} />;
    }
    const pending = (turn?.pending_client_tools || []).some(p => p.tool_call_id === part.toolCallId);
    const ours = clientTools(agent).some(t => t.name === toolName(part));
    if (part.state !== 'input-available' || !(pending || ours)) return null;
    const answer = (text, declined) =>
      act(async () => {
        const tool = toolName(part);
        if (declined) {
          return addToolOutput({ state: 'output-error', tool, toolCallId: part.toolCallId, errorText: text || 'The person declined to answer.' });
        }
        let output;
        if (tool === ASK_USER.name) output = { answer: text };
        else {
          try {
            output = JSON.parse(text);
          } catch {
            output = text;
          }
        }
        return addToolOutput({ tool, toolCallId: part.toolCallId, output });
      });
    return <ClientToolAnswer part={part} onAnswer={answer} disabled={busy} />;
  };

  const last = messages.at(-1);
  const liveId = live && last?.role === 'assistant' ? last.id : null;
  const lastAnswer = messages.findLast(m => m.role === 'assistant');
  const footer = message => {
    if (message.role !== 'assistant' || message.id === liveId) return null;
    const info = siblings.get(message.id);
    const branches = info && info.messages.length > 1;
    const again = message === lastAnswer && !live;
    if (!branches && !again) return null;
    return (
      <div className="actions">
        {branches && <Branches info={info} onGo={index => switchTo(info.messages[index].id)} />}
        {again && (
          <button type="button" className="regenerate" onClick={() => act(() => { lastChunk.current = null; return regenerate(); })}>
            Regenerate
          </button>
        )}
      </div>
    );
  };

  return (
    <>
      <TurnStatus turn={turn?.turn_id === turnId ? turn : null} streamError={streamError} config={config} />
      <form
        id="search-form"
        className="search"
        role="search"
        hidden={!exists}
        onSubmit={e => {
          e.preventDefault();
          search(query.trim());
        }}
      >
        <label htmlFor="search-input">Search this conversation</label>
        <input id="search-input" type="search" required value={query} onChange={e => setQuery(e.target.value)} />
        <button type="submit">Search</button>
      </form>
      {hits && (
        <ol id="search-hits" className="hits">
          {hits.hits.length ? (
            hits.hits.map(hit => (
              <li key={hit.message_id}>
                <button type="button" className="hit" data-message-id={hit.message_id} onClick={() => showHit(hit.message_id)}>
                  {`${hit.role}: `}
                  <Snippet html={hit.snippet} />
                </button>
              </li>
            ))
          ) : (
            <li className="empty">{`Nothing matches "${hits.q}".`}</li>
          )}
        </ol>
      )}
      <main>
        <ol id="messages" className="messages" aria-label="Messages">
          {messages.map(m => (
            <Message
              key={m.id}
              message={m}
              live={m.id === liveId}
              highlight={m.id === highlight}
              actions={m.id === liveId ? actions : undefined}
              footer={footer(m)}
            />
          ))}
          {live && !liveId && <Message key="live" live message={{ id: 'live', role: 'assistant', parts: [] }} />}
        </ol>
        <p id="empty" className="empty" hidden={messages.length > 0 || live}>
          No messages yet. Say something below.
        </p>
      </main>
      <Composer
        value={input}
        onChange={setInput}
        onSubmit={text => {
          if (!text || live) return;
          setInput('');
          send(text);
        }}
      >
        <button type="submit" id="send" disabled={live} title={live ? 'Wait for the answer, or cancel the turn' : ''}>
          Send
        </button>
        <button type="button" id="cancel" hidden={!live} onClick={cancel}>
          Cancel turn
        </button>
      </Composer>
    </>
  );
}
