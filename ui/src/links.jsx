// A link from a message (a model's source, a file) opens only if it is http(s) or, for a
// file, inline data: never `javascript:` or anything else a page could be tricked by.

export function safeUrl(url, { data = false } = {}) {
  try {
    const { protocol } = new URL(url, location.href);
    if (protocol === 'http:' || protocol === 'https:' || (data && protocol === 'data:')) return url;
  } catch {
    // not a URL at all
  }
  return null;
}

export function SafeLink({ url, data = false, children }) {
  const href = safeUrl(url, { data });
  return href ? (
    <a href={href} target="_blank" rel="noopener noreferrer">
      {children}
    </a>
  ) : (
    <span className="unsafe-link" title="not opened: not an http(s) link">
      {children}
    </span>
  );
}
