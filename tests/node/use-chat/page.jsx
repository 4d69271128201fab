// The smallest React app on the AI SDK's own `useChat`, with no code of ours between it and
// the gateway: tests/protocols/test_use_chat.py bundles it (esbuild) and drives it in
// Chromium. The URL says what to talk to: ?agent=&chat=&transport=default|workflow.
import { useChat } from '@ai-sdk/react';
import { WorkflowChatTransport } from '@ai-sdk/workflow/client';
import {
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from 'ai';
import { useRef, useState } from 'react';
import { createRoot } from 'react-dom/client';

const query = new URLSearchParams(location.search);
const agent = query.get('agent');
const chatId = query.get('chat');
const api = `/v1/agents/${agent}/chat`;
const turns = `/v1/agents/${agent}/conversations/${chatId}/turns`;
// A tool the person answers (the model asks them a question), declared with every request.
const ASK_USER = { name: 'ask_user', input_schema: { type: 'object' } };
const body = { client_tools: [ASK_USER] };

// The turn each POST answered (x-workflow-run-id), so that Stop can cancel it: useChat's own
// stop only drops the request, and the turn would go on on the server.
const seen = { runId: null };
async function recordingFetch(input, init) {
  const response = await fetch(input, init);
  const runId = response.headers.get('x-workflow-run-id');
  if (runId) seen.runId = runId;
  return response;
}

function transport() {
  if (query.get('transport') === 'workflow') {
    return new WorkflowChatTransport({
      api,
      fetch: recordingFetch,
      // The workflow transport posts `{messages}` only: the route needs the chat's id.
      prepareSendMessagesRequest: ({ id, messages, trigger, messageId }) => ({
        body: { id, messages, trigger, messageId, ...body },
      }),
    });
  }
  return new DefaultChatTransport({ api, fetch: recordingFetch, body });
}

function Answer({ onAnswer }) {
  const [answer, setAnswer] = useState('');
  return (
    <>
      <input aria-label="Your answer" value={answer} onChange={e => setAnswer(e.target.value)} />
      <button onClick={() => onAnswer(answer)}>Answer</button>
    </>
  );
}

function Part({ part, onDecide, onAnswer }) {
  if (part.type === 'text') return <p className="text">{part.text}</p>;
  if (!part.type.startsWith('tool-')) return null;
  return (
    <div className="tool" data-state={part.state}>
      <span className="tool-name">{part.type.slice(5)}</span>
      {part.type === 'tool-ask_user' && part.state === 'input-available' && (
        <Answer onAnswer={answer => onAnswer(part.toolCallId, answer)} />
      )}
      {part.state === 'approval-requested' && (
        <>
          <button onClick={() => onDecide(part.approval.id, true)}>Approve</button>
          <button onClick={() => onDecide(part.approval.id, false)}>Deny</button>
        </>
      )}
      {part.state === 'output-available' && (
        <span className="tool-output">{JSON.stringify(part.output)}</span>
      )}
    </div>
  );
}

function Chat({ initial }) {
  const [input, setInput] = useState('');
  const transportRef = useRef(null);
  transportRef.current ??= transport();
  const {
    messages,
    sendMessage,
    status,
    stop,
    regenerate,
    addToolApprovalResponse,
    addToolOutput,
    error,
  } = useChat({
      id: chatId,
      messages: initial,
      transport: transportRef.current,
      resume: initial.length > 0,
      sendAutomaticallyWhen: options =>
        lastAssistantMessageIsCompleteWithApprovalResponses(options) ||
        lastAssistantMessageIsCompleteWithToolCalls(options),
    });
  const busy = status === 'submitted' || status === 'streaming';
  const stopTurn = async () => {
    await stop();
    if (seen.runId) await fetch(`${turns}/${seen.runId}/cancel`, { method: 'POST' });
  };
  return (
    <main>
      <ol id="messages">
        {messages.map(m => (
          <li key={m.id} className={`message ${m.role}`} data-id={m.id}>
            {m.parts.map((p, i) => (
              <Part
                key={i}
                part={p}
                onDecide={(id, approved) => addToolApprovalResponse({ id, approved })}
                onAnswer={(toolCallId, answer) =>
                  addToolOutput({ tool: 'ask_user', toolCallId, output: { answer } })
                }
              />
            ))}
          </li>
        ))}
      </ol>
      <p id="status">{status}</p>
      {error && <p id="error">{error.message}</p>}
      <form
        onSubmit={e => {
          e.preventDefault();
          sendMessage({ text: input });
          setInput('');
        }}
      >
        <input aria-label="Message" value={input} onChange={e => setInput(e.target.value)} />
        <button type="submit" disabled={busy}>
          Send
        </button>
        <button type="button" onClick={stopTurn} disabled={!busy}>
          Stop
        </button>
        <button type="button" onClick={() => regenerate()} disabled={busy}>
          Regenerate
        </button>
      </form>
    </main>
  );
}

async function start() {
  // The server owns the history: a reload starts from the stored messages.
  const response = await fetch(`/v1/agents/${agent}/conversations/${chatId}/messages`);
  const initial = response.ok ? (await response.json()).messages : [];
  createRoot(document.getElementById('root')).render(<Chat initial={initial} />);
}

start();
