// UIMessage -> React elements. Text is always a React text child (never HTML from a model), and
// <details> holds what a reader opens on demand (reasoning, finished tool calls). Which
// <details> are open is kept across re-renders and across the switch from the streamed
// message to the stored one. An answer's text is markdown, rendered by markdown.jsx.
import { SafeLink } from './links.jsx';
import { Markdown } from './markdown.jsx';

const opened = new Set();

function pretty(value) {
  if (value === undefined) return '';
  return typeof value === 'string' ? value : JSON.stringify(value, null, 2);
}

function Collapsible({ id, className, summary, attrs = {}, children }) {
  return (
    <details
      className={className}
      open={opened.has(id)}
      onToggle={e => (e.currentTarget.open ? opened.add(id) : opened.delete(id))}
      {...attrs}
    >
      <summary>{summary}</summary>
      {children}
    </details>
  );
}

export function isToolPart(part) {
  return part.type === 'dynamic-tool' || part.type.startsWith('tool-');
}

export function toolName(part) {
  return part.type === 'dynamic-tool' ? part.toolName : part.type.slice('tool-'.length);
}

const STATES = {
  'input-streaming': 'preparing its input',
  'input-available': 'running',
  'approval-requested': 'waits for your approval',
  'approval-responded': 'decided',
  'output-available': 'done',
  'output-error': 'failed',
  'output-denied': 'denied',
};

// `controls`: what a person may do on this part now (approve, answer), or null.
function ToolPart({ messageId, part, controls }) {
  // A client tool's call is `input-available` while it waits for the person, not running.
  const waits = controls && part.state === 'input-available';
  const state = waits ? 'waits for your answer' : STATES[part.state] || part.state;
  const summary = `Tool ${toolName(part)}: ${state}`;
  const body = (
    <>
      <p className="label">Input</p>
      <pre className="tool-input">{pretty(part.input)}</pre>
      {part.state === 'output-available' && (
        <>
          <p className="label">Output</p>
          <pre className="tool-output">{pretty(part.output)}</pre>
        </>
      )}
      {part.state === 'output-error' && <p className="error-text tool-output">{part.errorText}</p>}
      {part.state !== 'output-available' &&
        part.state !== 'output-error' &&
        (part.state === 'output-denied' || part.approval?.approved === false) && (
          <p className="tool-output">{`Denied${part.approval?.reason ? `: ${part.approval.reason}` : ''}`}</p>
        )}
    </>
  );
  const attrs = { 'data-tool-call-id': part.toolCallId, 'data-state': part.state };
  if (controls) {
    // Waiting for a person: shown open, with the input to judge, never behind a click.
    return (
      <section {...attrs} className="tool needs-person" aria-label={summary}>
        <p className="label">{summary}</p>
        {body}
        {controls}
      </section>
    );
  }
  return (
    <Collapsible id={`${messageId}:${part.toolCallId}`} className="tool" summary={summary} attrs={attrs}>
      {body}
    </Collapsible>
  );
}

// What the turn that gave this answer spent (the `finish` chunk's `messageMetadata.usage`,
// stored on the message): tokens, and the cost when the model's price is known.
function Usage({ usage, model }) {
  if (!usage) return null;
  const words = [`${usage.input_tokens ?? 0} in`, `${usage.output_tokens ?? 0} out tokens`];
  if (usage.reasoning_tokens) words.push(`${usage.reasoning_tokens} reasoning`);
  if (usage.cost) words.push(`$${Number(usage.cost).toFixed(4)}`);
  if (model) words.push(model);
  return (
    <p className="usage" title="What this answer cost">
      {words.join(' · ')}
    </p>
  );
}

function Part({ message, part, index, actions }) {
  if (part.type === 'text') {
    if (!part.text) return null;
    return message.role === 'assistant' ? <Markdown text={part.text} /> : <p className="text">{part.text}</p>;
  }
  if (part.type === 'reasoning') {
    if (!part.text) return null;
    return (
      <Collapsible id={`${message.id}:r${index}`} className="reasoning" summary="Reasoning">
        <p className="text">{part.text}</p>
      </Collapsible>
    );
  }
  if (isToolPart(part)) return <ToolPart messageId={message.id} part={part} controls={actions(part)} />;
  if (part.type === 'file') {
    return (
      <p>
        <SafeLink url={part.url} data>
          {part.filename || part.mediaType || 'file'}
        </SafeLink>
      </p>
    );
  }
  if (part.type === 'source-url') {
    return (
      <p>
        <SafeLink url={part.url}>{part.title || part.url}</SafeLink>
      </p>
    );
  }
  return null;
}

export function Message({ message, actions = () => null, footer = null, live = false, highlight = false }) {
  const who = message.role === 'user' ? 'You' : message.role === 'assistant' ? 'Agent' : message.role;
  const classes = ['message', message.role, highlight ? 'highlight' : null].filter(Boolean).join(' ');
  return (
    <li
      id={live ? 'live' : undefined}
      aria-busy={live ? 'true' : undefined}
      className={classes}
      data-message-id={message.id}
      data-role={message.role}
    >
      <p className="role">{who}</p>
      {message.parts.map((part, i) => (
        <Part key={i} message={message} part={part} index={i} actions={actions} />
      ))}
      {live && message.parts.every(p => !p.text && !isToolPart(p)) && <p className="text waiting">…</p>}
      <Usage usage={message.metadata?.usage} model={message.metadata?.model} />
      {footer}
    </li>
  );
}
