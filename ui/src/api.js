// Calls to the gateway's /v1 API: the bearer key (kept in this tab only) and errors a
// person can act on. Every failure becomes an ApiError whose message says what to do.

const KEY = 'think.apiKey';

export class ApiError extends Error {
  constructor(status, message, problem = null) {
    super(message);
    this.name = 'ApiError';
    this.status = status; // 0: the API did not answer
    this.problem = problem;
  }
}

export function apiKey() {
  return sessionStorage.getItem(KEY) || '';
}

export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

export function headers(extra = {}) {
  const key = apiKey();
  return key ? { ...extra, authorization: `Bearer ${key}` } : { ...extra };
}

// fetch, with the API's answer checked: resolves to the Response when it is 2xx.
export async function request(path, { method = 'GET', body, signal, headers: extra } = {}) {
  const init = { method, signal, headers: headers(extra) };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers['content-type'] = 'application/json';
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    if (error?.name === 'AbortError') throw error;
    throw new ApiError(
      0,
      `The API at ${location.origin} is not answering (${error?.message || error}). ` +
        'Is `think dev` (or `think api`) still running? Reload this page once it is.',
    );
  }
  if (response.ok) return response;
  let problem = null;
  try {
    problem = await response.json();
  } catch {
    // not JSON: a proxy's page, say; the status still says enough
  }
  throw new ApiError(response.status, explain(response.status, problem, method, path), problem);
}

export async function json(path, options) {
  const response = await request(path, options);
  return response.status === 204 ? null : response.json();
}

export function explain(status, problem, method, path) {
  const detail = problem?.detail || problem?.title || `HTTP ${status}`;
  if (status === 401) return `${detail}. Enter an API key for this gateway.`;
  if (status === 409) return `Conflict: ${detail}. Reload the conversation to see where it stands.`;
  if (status === 422 && Array.isArray(problem?.errors)) {
    const fields = problem.errors.map(e => `${(e.loc || []).join('.')}: ${e.msg}`).join('; ');
    return `The API refused ${method} ${path}: ${fields || detail}`;
  }
  if (status >= 500) return `The API failed (${status}): ${detail}. The gateway's log says more.`;
  return detail;
}
