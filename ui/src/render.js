// UIMessage -> DOM. Plain elements, text set with textContent (never HTML from a model), and
// <details> for what a reader opens on demand (reasoning, finished tool calls). Which
// <details> are open is kept across re-renders of a streaming message.

const open = new Set();

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value == null || value === false) continue;
    if (name.startsWith('on')) node.addEventListener(name.slice(2), value);
    else if (name === 'text') node.textContent = value;
    else node.setAttribute(name, value === true ? '' : value);
  }
  for (const child of children.flat()) {
    if (child != null && child !== false) node.append(child);
  }
  return node;
}

function pretty(value) {
  if (value === undefined) return '';
  return typeof value === 'string' ? value : JSON.stringify(value, null, 2);
}

function collapsible(key, className, summary, ...body) {
  const details = el('details', { class: className, open: open.has(key) }, el('summary', {}, summary), ...body);
  details.addEventListener('toggle', () => (details.open ? open.add(key) : open.delete(key)));
  return details;
}

// A link from a message (a model's source, a file) opens only if it is http(s) or, for a
// file, inline data: never `javascript:` or anything else a page could be tricked by.
function safeUrl(url, { data = false } = {}) {
  try {
    const { protocol } = new URL(url, location.href);
    if (protocol === 'http:' || protocol === 'https:' || (data && protocol === 'data:')) return url;
  } catch {
    // not a URL at all
  }
  return null;
}

function link(url, label, options) {
  const href = safeUrl(url, options);
  return href
    ? el('a', { href, target: '_blank', rel: 'noopener noreferrer' }, label)
    : el('span', { class: 'unsafe-link', title: 'not opened: not an http(s) link' }, label);
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

// `actions(part)`: the controls a person may use on this part now (approve, answer), or null.
function toolPart(messageId, part, actions) {
  const name = toolName(part);
  const controls = actions(part);
  // A client tool's call is `input-available` while it waits for the person, not running.
  const waits = controls && part.state === 'input-available';
  const state = waits ? 'waits for your answer' : STATES[part.state] || part.state;
  const body = [
    el('p', { class: 'label', text: 'Input' }),
    el('pre', { class: 'tool-input', text: pretty(part.input) }),
  ];
  if (part.state === 'output-available') {
    body.push(el('p', { class: 'label', text: 'Output' }), el('pre', { class: 'tool-output', text: pretty(part.output) }));
  } else if (part.state === 'output-error') {
    body.push(el('p', { class: 'error-text tool-output', text: part.errorText }));
  } else if (part.state === 'output-denied' || part.approval?.approved === false) {
    const reason = part.approval?.reason ? `: ${part.approval.reason}` : '';
    body.push(el('p', { class: 'tool-output', text: `Denied${reason}` }));
  }
  const summary = `Tool ${name}: ${state}`;
  const attrs = { 'data-tool-call-id': part.toolCallId, 'data-state': part.state };
  if (controls) {
    // Waiting for a person: shown open, with the input to judge, never behind a click.
    return el('section', { ...attrs, class: 'tool needs-person', 'aria-label': summary }, el('p', { class: 'label', text: summary }), ...body, controls);
  }
  const node = collapsible(`${messageId}:${part.toolCallId}`, 'tool', summary, ...body);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

export function messageNode(message, { actions = () => null, footer = null } = {}) {
  const parts = [];
  message.parts.forEach((part, index) => {
    if (part.type === 'text') {
      if (part.text) parts.push(el('p', { class: 'text', text: part.text }));
    } else if (part.type === 'reasoning') {
      if (part.text) parts.push(collapsible(`${message.id}:r${index}`, 'reasoning', 'Reasoning', el('p', { class: 'text', text: part.text })));
    } else if (isToolPart(part)) {
      parts.push(toolPart(message.id, part, actions));
    } else if (part.type === 'file') {
      parts.push(el('p', {}, link(part.url, part.filename || part.mediaType || 'file', { data: true })));
    } else if (part.type === 'source-url') {
      parts.push(el('p', {}, link(part.url, part.title || part.url)));
    }
  });
  const who = message.role === 'user' ? 'You' : message.role === 'assistant' ? 'Agent' : message.role;
  return el(
    'li',
    { class: `message ${message.role}`, 'data-message-id': message.id, 'data-role': message.role },
    el('p', { class: 'role', text: who }),
    ...parts,
    footer,
  );
}
