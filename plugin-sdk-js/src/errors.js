// Why a call failed, as the gateway's `provider-error` says it, and the errors of upstream APIs.

/** The longest provider message kept, in characters; error pages can be huge. */
const MAX_MESSAGE_CHARS = 1000;

/**
 * Why a call failed; the gateway turns it into the caller's HTTP status: `invalid-request` → 400,
 * `upstream` with status 429 → 429 (with `Retry-After`), with 400, 404, 413 or 422 → that status
 * (the provider refused the caller's request), other `upstream` and `failed` → 502, `timeout` →
 * 504. Throw one from any method of a provider; any other exception is a bug (see `crash.js`).
 */
export class ProviderError extends Error {
  /**
   * @param {'invalid-request' | 'upstream' | 'timeout' | 'failed'} kind
   * @param {string} message
   * @param {{status: number, retryAfter?: number}} [upstream] with `upstream`
   */
  constructor(kind, message, upstream) {
    super(message);
    this.name = 'ProviderError';
    this.kind = kind;
    if (kind === 'upstream') {
      this.status = upstream?.status ?? 500;
      this.retryAfter = upstream?.retryAfter;
    }
  }

  /** The request cannot be served as given (unsupported type, bad parameter): 400. */
  static invalidRequest(message) {
    return new ProviderError('invalid-request', message);
  }

  /** The upstream answered with an error `status`, saying `message`. */
  static upstream(status, message, retryAfter) {
    return new ProviderError('upstream', message, { status, retryAfter });
  }

  /** The upstream did not answer in time: 504. */
  static timeout(message) {
    return new ProviderError('timeout', message);
  }

  /** Anything else (transport failure, an answer the plugin cannot read): 502. */
  static failed(message) {
    return new ProviderError('failed', message);
  }

  /** An upstream answer the plugin cannot read; `error` should not quote the answer. */
  static malformed(error) {
    const why = error instanceof Error ? error.message : String(error);
    return ProviderError.failed(`malformed response from upstream: ${why}`);
  }

  /** The error as the WIT's `provider-error` variant. */
  toWit() {
    if (this.kind === 'upstream') {
      const retryAfter = this.retryAfter ?? undefined;
      return { tag: 'upstream', val: { status: this.status, message: this.message, retryAfter } };
    }
    return { tag: this.kind, val: this.message };
  }
}

/**
 * `ProviderError.upstream` from an error answer of the upstream API. The message is the body's
 * `{"error": {"message"}}`, `{"error": "..."}` or `{"message"}`, else the body text (trimmed), cut
 * to 1000 characters; an empty body gives a message naming the status. `retryAfter` is the
 * `Retry-After` header's value (delay-seconds, a fraction rounded up, or an HTTP date).
 *
 * @param {number} status
 * @param {string} body
 * @param {string | undefined} [retryAfter]
 */
export function upstreamError(status, body, retryAfter) {
  const text = jsonMessage(body) ?? body.trim();
  const message = text === '' ? `the provider answered HTTP ${status} without a message` : truncate(text);
  return ProviderError.upstream(status, message, parseRetryAfter(retryAfter));
}

/** Google's canonical status names as HTTP statuses. */
const CANONICAL_STATUS = {
  INVALID_ARGUMENT: 400,
  FAILED_PRECONDITION: 400,
  OUT_OF_RANGE: 400,
  UNAUTHENTICATED: 401,
  PERMISSION_DENIED: 403,
  NOT_FOUND: 404,
  RESOURCE_EXHAUSTED: 429,
  UNAVAILABLE: 503,
  DEADLINE_EXCEEDED: 504,
};

/**
 * `ProviderError.upstream` from an error the upstream reported inside a successful answer
 * (mid-stream, or a 200 answer holding an `error` object). `error` is the error object
 * (`{message, code, status}`) or a string. The status is its `code` when that is an HTTP error
 * status, else the HTTP status of a Google `status` name, else 500.
 */
export function embeddedError(error) {
  let message;
  if (typeof error === 'string') {
    message = error;
  } else if (isObject(error) && typeof error.message === 'string' && error.message.trim() !== '') {
    message = error.message;
  } else {
    message = JSON.stringify(error);
  }
  let status;
  if (isObject(error)) {
    const code = typeof error.code === 'string' ? Number(error.code.trim()) : error.code;
    if (Number.isInteger(code) && code >= 400 && code <= 599) {
      status = code;
    } else if (typeof error.status === 'string') {
      status = CANONICAL_STATUS[error.status];
    }
  }
  return ProviderError.upstream(status ?? 500, truncate(message));
}

function isObject(value) {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function jsonMessage(body) {
  let value;
  try {
    value = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (!isObject(value)) {
    return undefined;
  }
  let message;
  if (isObject(value.error)) {
    message = value.error.message;
  } else if (typeof value.error === 'string') {
    message = value.error;
  }
  message ??= value.message;
  if (typeof message !== 'string' || message.trim() === '') {
    return undefined;
  }
  return message.trim();
}

function truncate(message) {
  const chars = Array.from(message);
  return chars.length > MAX_MESSAGE_CHARS ? chars.slice(0, MAX_MESSAGE_CHARS).join('') : message;
}

const U32_MAX = 4294967295;

/**
 * A `Retry-After` value in seconds: delay-seconds (a fraction rounded up) or an HTTP date (the
 * seconds from `now` until then, rounded up; 0 when past). Saturates at 2^32 - 1; garbage gives
 * `undefined`.
 *
 * @param {string | undefined} value
 * @param {number} [now] milliseconds since the epoch
 */
export function parseRetryAfter(value, now = Date.now()) {
  if (typeof value !== 'string') {
    return undefined;
  }
  const text = value.trim();
  if (/^[+]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(text)) {
    return Math.min(Math.ceil(Number(text)), U32_MAX);
  }
  const date = parseHttpDate(text);
  if (date === undefined) {
    return undefined;
  }
  return Math.min(Math.max(0, Math.ceil((date - now) / 1000)), U32_MAX);
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const LONG_DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];

/** An HTTP date (IMF-fixdate, RFC 850 or asctime) in milliseconds since the epoch. */
function parseHttpDate(text) {
  let m = /^([A-Za-z]{3}), (\d{2}) ([A-Za-z]{3}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/.exec(text);
  if (m) {
    return checkedDate(DAYS.indexOf(m[1]), m[4], m[3], m[2], m[5], m[6], m[7]);
  }
  m = /^([A-Za-z]+), (\d{2})-([A-Za-z]{3})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) GMT$/.exec(text);
  if (m) {
    // RFC 850's two-digit year: as RFC 7231 says, a year more than 50 years ahead is in the past.
    let year = 2000 + Number(m[4]);
    if (year > new Date().getUTCFullYear() + 50) {
      year -= 100;
    }
    return checkedDate(LONG_DAYS.indexOf(m[1]), year, m[3], m[2], m[5], m[6], m[7]);
  }
  m = /^([A-Za-z]{3}) ([A-Za-z]{3}) ([ \d]\d) (\d{2}):(\d{2}):(\d{2}) (\d{4})$/.exec(text);
  if (m) {
    return checkedDate(DAYS.indexOf(m[1]), m[7], m[2], m[3].trim(), m[4], m[5], m[6]);
  }
  return undefined;
}

function checkedDate(weekday, year, month, day, hour, minute, second) {
  const monthIndex = MONTHS.indexOf(month);
  const [y, d, h, min, s] = [year, day, hour, minute, second].map(Number);
  if (weekday < 0 || monthIndex < 0 || h > 23 || min > 59 || s > 60) {
    return undefined;
  }
  const time = Date.UTC(y, monthIndex, d, h, min, s);
  const date = new Date(time);
  if (date.getUTCDate() !== d || date.getUTCMonth() !== monthIndex || date.getUTCDay() !== weekday) {
    return undefined;
  }
  return time;
}
