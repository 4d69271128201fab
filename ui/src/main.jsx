// The chat page: pick an agent and a conversation, talk to it through `useChat` (chat.jsx),
// see what waits for a decision everywhere. State lives in the URL (/ui/{agent}/{conversation});
// a reload picks up an answer still streaming (useChat's `resume`, transport.js).
import { useCallback, useEffect, useState } from 'react';
import { createRoot } from 'react-dom/client';
import { ApiError, apiKey, json, setApiKey } from './api.js';
import { Chat, ENDED, conversationPath, loadPath } from './chat.jsx';
import { Composer } from './composer.jsx';

const config = JSON.parse(document.getElementById('think-config').textContent || '{}');
const base = name => `/v1/agents/${encodeURIComponent(name)}`;
const pageUrl = (agent, cid) =>
  !agent ? '/ui' : cid ? `/ui/${encodeURIComponent(agent)}/${encodeURIComponent(cid)}` : `/ui/${encodeURIComponent(agent)}`;

function Approvals({ report, clear }) {
  const [approvals, setApprovals] = useState(null);
  const load = useCallback(async () => setApprovals((await json('/v1/approvals')).approvals), []);
  useEffect(() => {
    load().catch(report);
  }, [load, report]);
  const decide = (a, approved) => async () => {
    clear();
    try {
      const turn = `${conversationPath(a.agent, a.conversation_id)}/turns/${encodeURIComponent(a.turn_id)}`;
      await json(`${turn}/approvals/${encodeURIComponent(a.approval_id)}`, { method: 'POST', body: { approved } });
      await load();
    } catch (error) {
      report(error);
    }
  };
  const list = approvals || [];
  return (
    <section id="approvals" className="panel approvals" aria-label="Waiting for a decision">
      <h2>Waiting for a decision, in every conversation</h2>
      <ol id="approvals-list">
        {list.map(a => (
          <li key={a.approval_id} data-approval-id={a.approval_id}>
            <strong>{a.action || a.tool_name}</strong>
            {' in '}
            <a href={pageUrl(a.agent, a.conversation_id)}>{`${a.agent} / ${a.conversation_id}`}</a>
            <pre className="tool-input">{JSON.stringify(a.input, null, 2)}</pre>
            {a.turn_id && (
              <span className="actions">
                <button type="button" onClick={decide(a, true)}>
                  Approve
                </button>
                <button type="button" onClick={decide(a, false)}>
                  Deny
                </button>
              </span>
            )}
          </li>
        ))}
      </ol>
      <p id="approvals-empty" className="empty" hidden={approvals == null || list.length > 0}>
        Nothing waits for a decision.
      </p>
    </section>
  );
}

// The conversations, as the header's list (narrow screens) and the sidebar (wide ones), each
// by its title: the start of its first message, or its id before it has one.
function Sidebar({ agent, conversations, current, onOpen }) {
  const when = c => new Date(c.created_at).toLocaleString();
  return (
    <nav id="sidebar" className="sidebar" aria-label="Conversations">
      <h2>Conversations</h2>
      <ol id="conversation-list">
        {conversations.map(c => (
          <li key={c.id}>
            <a
              href={pageUrl(agent, c.id)}
              aria-current={c.id === current ? 'page' : undefined}
              title={c.id}
              onClick={e => {
                e.preventDefault();
                onOpen(c.id);
              }}
            >
              <span className="title">{c.title || 'New conversation'}</span>
              <small>{when(c)}</small>
            </a>
          </li>
        ))}
      </ol>
    </nav>
  );
}

function App() {
  const [error, setError] = useState(null);
  const [askKey, setAskKey] = useState(false);
  const [key, setKey] = useState('');
  const [agents, setAgents] = useState([]);
  const [agent, setAgent] = useState(null);
  const [conversations, setConversations] = useState([]);
  const [opened, setOpened] = useState(null); // what <Chat> shows: {cid, initial, ...}
  const [showApprovals, setShowApprovals] = useState(false);

  const report = useCallback(e => {
    if (e?.name === 'AbortError') return;
    setError(e instanceof Error ? e.message : String(e));
    if (e instanceof ApiError && e.status === 401) setAskKey(true);
  }, []);
  const clear = useCallback(() => setError(null), []);
  const attempt = async action => {
    clear();
    try {
      await action();
    } catch (e) {
      report(e);
    }
  };

  const listConversations = async name => {
    const { conversations: found } = await json(`${base(name)}/conversations`);
    setConversations(found);
    return found;
  };

  async function openConversation(a, cid, { push = true, firstText = null } = {}) {
    history[push ? 'pushState' : 'replaceState'](null, '', pageUrl(a.name, cid));
    document.title = cid ? `${cid} · ${a.name} · Think` : `${a.name} · Think`;
    const next = { cid, exists: false, initial: [], siblings: new Map(), activeTurn: null, firstText, at: Date.now() };
    if (cid) {
      try {
        await json(conversationPath(a.name, cid));
        next.exists = true;
      } catch (e) {
        if (!(e instanceof ApiError && e.status === 404)) throw e; // else the first message creates it
      }
    }
    if (next.exists) {
      const [stored, { turns }] = await Promise.all([
        loadPath(a.name, cid),
        json(`${conversationPath(a.name, cid)}/turns`),
      ]);
      next.initial = stored.messages;
      next.siblings = stored.siblings;
      const active = turns.find(t => !ENDED.has(t.status));
      if (active) {
        // useChat resumes its stream from the first chunk: its answer so far is not shown twice.
        next.activeTurn = active.turn_id;
        if (active.message_id && next.initial.at(-1)?.id === active.message_id) next.initial = next.initial.slice(0, -1);
      }
    }
    setOpened(next);
  }

  async function selectAgent(all, name, cid) {
    const a = all.find(x => x.name === name);
    setAgent(a);
    const found = await listConversations(a.name);
    await openConversation(a, cid || found[0]?.id || null, { push: false });
  }

  async function boot() {
    if (config.auth_required && !apiKey()) {
      setAskKey(true);
      return;
    }
    const [, , agentName, cid] = location.pathname.split('/').map(decodeURIComponent);
    const all = (await json('/v1/agents')).agents;
    setAgents(all);
    if (all.length === 0) throw new Error('This gateway hosts no agent: set THINK_AGENTS.');
    const found = all.find(a => a.name === agentName);
    if (agentName && !found) {
      await selectAgent(all, all[0].name, null);
      const names = all.map(a => a.name).join(', ');
      throw new Error(`There is no agent named "${agentName}" here. This gateway hosts: ${names}. Showing ${all[0].name}.`);
    }
    await selectAgent(all, (found || all[0]).name, cid || null);
  }

  useEffect(() => {
    attempt(boot);
    const back = () => location.reload();
    addEventListener('popstate', back);
    return () => removeEventListener('popstate', back);
  }, []); // eslint-disable-line react-hooks/exhaustive-deps

  const newConversation = async firstText => {
    const conv = await json(`${base(agent.name)}/conversations`, { method: 'POST', body: {} });
    await listConversations(agent.name);
    await openConversation(agent, conv.id, { firstText });
    if (!firstText) document.getElementById('input')?.focus();
  };

  const cid = opened?.cid ?? null;
  const when = c => new Date(c.created_at).toLocaleString();
  const options = conversations.map(c => ({ value: c.id, text: c.title ? `${c.title} (${c.id})` : `${c.id} (${when(c)})` }));
  if (cid && !conversations.some(c => c.id === cid)) options.unshift({ value: cid, text: `${cid} (new)` });
  if (options.length === 0) options.push({ value: '', text: 'none yet' });
  const tools = (agent?.tools || []).map(t => t.name + (t.needs_approval ? ' (asks first)' : ''));
  const about = agent
    ? `${agent.description || agent.name}${agent.served_by ? ` (answered by ${agent.served_by})` : ''}` +
      (tools.length ? `. Tools: ${tools.join(', ')}.` : '.')
    : '';

  return (
    <>
      <header className="bar">
        <h1>Think</h1>
        <span className="field">
          <label htmlFor="agent">Agent</label>{' '}
          <select
            id="agent"
            aria-describedby="agent-about"
            value={agent?.name || ''}
            onChange={e => attempt(() => selectAgent(agents, e.target.value, null))}
          >
            {agents.map(a => (
              <option key={a.name} value={a.name}>
                {a.name}
              </option>
            ))}
          </select>
        </span>
        <span className="field">
          <label htmlFor="conversation">Conversation</label>{' '}
          <select id="conversation" value={cid || ''} onChange={e => attempt(() => openConversation(agent, e.target.value || null))}>
            {options.map(o => (
              <option key={o.value} value={o.value}>
                {o.text}
              </option>
            ))}
          </select>
        </span>
        <button type="button" id="new-conversation" onClick={() => attempt(() => newConversation(null))}>
          New conversation
        </button>
        <button
          type="button"
          id="approvals-button"
          aria-expanded={String(showApprovals)}
          aria-controls="approvals"
          onClick={() => setShowApprovals(!showApprovals)}
        >
          Approvals
        </button>
        <button type="button" id="key-button" hidden={!config.auth_required} onClick={() => setAskKey(true)}>
          API key
        </button>
      </header>
      {showApprovals ? (
        <Approvals report={report} clear={clear} />
      ) : (
        <section id="approvals" className="panel approvals" aria-label="Waiting for a decision" hidden />
      )}
      {agent && <Sidebar agent={agent.name} conversations={conversations} current={cid || conversations[0]?.id} onOpen={id => attempt(() => openConversation(agent, id))} />}
      <p id="agent-about" className="about">
        {about}
      </p>
      <div id="alert" role="alert" hidden={!error}>
        {error}
      </div>
      {askKey && (
        <form
          id="key-form"
          className="panel"
          onSubmit={e => {
            e.preventDefault();
            setApiKey(key.trim());
            setAskKey(false);
            attempt(boot);
          }}
        >
          <label htmlFor="key-input">This gateway needs an API key. It stays in this tab only (sessionStorage).</label>
          <input id="key-input" type="password" autoComplete="off" required autoFocus value={key} onChange={e => setKey(e.target.value)} />
          <button type="submit">Use key</button>
        </form>
      )}
      {agent && opened && opened.cid && (
        <Chat
          key={`${agent.name}/${opened.cid}/${opened.at}`}
          agent={agent}
          cid={opened.cid}
          exists={opened.exists}
          initial={opened.initial}
          initialSiblings={opened.siblings}
          activeTurn={opened.activeTurn}
          firstText={opened.firstText}
          config={config}
          report={report}
          clear={clear}
          onStarted={() => listConversations(agent.name).catch(report)}
        />
      )}
      {agent && opened && !opened.cid && <NoConversation onSend={text => attempt(() => newConversation(text))} />}
    </>
  );
}

// An agent with no conversation yet: the first message creates one.
function NoConversation({ onSend }) {
  const [input, setInput] = useState('');
  return (
    <>
      <main>
        <ol id="messages" className="messages" aria-label="Messages" />
      </main>
      <Composer value={input} onChange={setInput} onSubmit={text => text && onSend(text)}>
        <button type="submit" id="send">
          Send
        </button>
      </Composer>
    </>
  );
}

createRoot(document.getElementById('root')).render(<App />);
