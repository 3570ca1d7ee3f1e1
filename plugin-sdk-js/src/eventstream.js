// AWS event streams (`application/vnd.amazon.eventstream`), the binary framing Amazon Bedrock
// streams its answers in (`ConverseStream`, `InvokeModelWithResponseStream`); the same rules as
// the Rust SDK's `eventstream` module.
//
// Each frame is one `Message`: a prelude (the frame's total length and its headers' length, both
// `u32` big-endian, and a CRC32 of those 8 bytes), typed headers (`:event-type`, `:message-type`,
// `:content-type`, ...), a payload, and a CRC32 of everything before it.


import { concatBytes } from './bytes.js';
/**
 * The largest frame `EventStreamParser` accepts (16 MiB, in the frame's declared length): a
 * larger one is an error as soon as its prelude arrives. Bedrock's frames are a few hundred bytes.
 */
export const MAX_FRAME_LEN = 16 * 1024 * 1024;

/** Total length, headers length, prelude CRC. */
const PRELUDE_LEN = 12;
/** The prelude and the message CRC: a frame without headers or payload. */
const MIN_FRAME_LEN = PRELUDE_LEN + 4;

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n += 1) {
    let c = n;
    for (let k = 0; k < 8; k += 1) {
      c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    }
    table[n] = c >>> 0;
  }
  return table;
})();

/**
 * The CRC32 (IEEE 802.3, as zlib's) of `bytes`, an unsigned 32-bit number.
 *
 * @param {Uint8Array} bytes
 * @returns {number}
 */
export function crc32(bytes) {
  let crc = 0xffffffff;
  for (let i = 0; i < bytes.length; i += 1) {
    crc = CRC_TABLE[(crc ^ bytes[i]) & 0xff] ^ (crc >>> 8);
  }
  return (crc ^ 0xffffffff) >>> 0;
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const lossy = new TextDecoder('utf-8', { ignoreBOM: true });
const encoder = new TextEncoder();

/**
 * A malformed event stream: a checksum that does not match, lengths that do not fit, an unknown
 * header type, text that is not UTF-8, a frame over `MAX_FRAME_LEN`, or a body that ends inside a
 * frame. The drivers report it as `ProviderError.malformed` (`failed`).
 */
export class FrameError extends Error {
  constructor(message) {
    super(message);
    this.name = 'FrameError';
  }
}

/**
 * An error the upstream sent inside the stream; see `Message.exception`. Its text (`toString`) is
 * `kind: message`, or `kind` alone without a message.
 */
export class MessageException {
  constructor(kind, message) {
    /** `:exception-type` (e.g. `throttlingException`), else `:error-code`, else the message type. */
    this.kind = kind;
    /** What the upstream says went wrong (may be empty). */
    this.message = message;
  }

  toString() {
    return this.message === '' ? this.kind : `${this.kind}: ${this.message}`;
  }
}

/**
 * One message (frame) of an event stream: its headers in the order sent, as `[name, value]`
 * pairs, and its payload (JSON for Bedrock's events and exceptions). A header's value by wire
 * type: 0/1 a boolean; 2 (byte), 3 (short), 4 (int) a number; 5 (long) and 8 (timestamp,
 * milliseconds since the Unix epoch) a bigint; 6 (bytes) and 9 (a UUID's 16 bytes) a Uint8Array;
 * 7 a string.
 */
export class Message {
  /**
   * @param {[string, boolean | number | bigint | string | Uint8Array][]} headers
   * @param {Uint8Array} payload
   */
  constructor(headers = [], payload = new Uint8Array(0)) {
    this.headers = headers;
    this.payload = payload;
  }

  /**
   * The value of the first header named exactly `name` (the format's names are case-sensitive:
   * `:event-type`, `:message-type`, `:exception-type`, `:content-type`).
   */
  header(name) {
    return this.headers.find(([n]) => n === name)?.[1];
  }

  /** The value of the first header named `name` when it is a string. */
  stringHeader(name) {
    const value = this.header(name);
    return typeof value === 'string' ? value : undefined;
  }

  /** `:event-type` (Bedrock's `messageStart`, `contentBlockDelta`, `metadata`, ...). */
  get eventType() {
    return this.stringHeader(':event-type');
  }

  /** `:message-type`: `event`, or `exception` / `error` for an error in the stream. */
  get messageType() {
    return this.stringHeader(':message-type');
  }

  /** The payload as text (UTF-8). */
  text() {
    return lossy.decode(this.payload);
  }

  /**
   * When the upstream sent an error in the stream instead of an event (`:message-type`
   * `exception` or `error`): its kind and text. The kind is `:exception-type`, else `:error-code`,
   * else the message type; the text is the payload's JSON `message` (or `Message`), else the
   * `:error-message` header, else the payload itself (cut to 300 characters).
   *
   * @returns {MessageException | undefined}
   */
  exception() {
    const messageType = this.messageType;
    if (messageType !== 'exception' && messageType !== 'error') {
      return undefined;
    }
    const kind = this.stringHeader(':exception-type') ?? this.stringHeader(':error-code') ?? messageType;
    const message =
      jsonMessage(this.payload) ??
      this.stringHeader(':error-message') ??
      // An error message, not a place to quote a large payload.
      Array.from(this.text()).slice(0, 300).join('');
    return new MessageException(kind, message);
  }
}

/** The payload's JSON `message` (else `Message`) when it is a string. */
function jsonMessage(payload) {
  let parsed;
  try {
    parsed = JSON.parse(utf8.decode(payload));
  } catch {
    return undefined;
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    return undefined;
  }
  const value = Object.hasOwn(parsed, 'message') ? parsed.message : parsed.Message;
  return typeof value === 'string' ? value : undefined;
}

/**
 * An incremental event-stream parser: feed it the body's bytes as they arrive, split anywhere,
 * and it returns the messages completed so far; every split gives the same messages and the same
 * error. It keeps at most the frame being received, and never buffers one declared larger than
 * `MAX_FRAME_LEN`. Call `finish()` at the end of the body: bytes left over are a frame cut short.
 * After an error the parser stays failed: every later `push` and `finish` throws the same error.
 */
export class EventStreamParser {
  constructor() {
    /** The chunks of the frame being received, when a push ended inside it. */
    this.pending = [];
    this.pendingLength = 0;
    /** How many bytes the pending ones must reach before anything can be decided. */
    this.wanted = PRELUDE_LEN;
    /** The first error met, kept for every later call. */
    this.error = undefined;
  }

  /**
   * Consumes the next bytes of the stream and returns the messages they completed, in order. A
   * malformed frame throws `FrameError`; when messages were completed before it in the same bytes
   * they are returned first, and the error comes from the next call (an empty `push` will do, or
   * `finish`), so no message before the fault is lost.
   *
   * @param {Uint8Array} bytes
   * @returns {Message[]}
   */
  push(bytes) {
    if (this.error) {
      throw this.error;
    }
    const messages = [];
    if (bytes.length === 0) {
      return messages;
    }
    this.pending.push(bytes);
    this.pendingLength += bytes.length;
    if (this.pendingLength < this.wanted) {
      // Kept, not joined: a large frame arriving in many chunks is copied once.
      return messages;
    }
    const data = concatBytes(this.pending);
    let at = 0;
    let wanted = PRELUDE_LEN;
    try {
      while (data.length - at >= PRELUDE_LEN) {
        const total = checkPrelude(data.subarray(at, at + PRELUDE_LEN));
        if (data.length - at < total) {
          wanted = total;
          break;
        }
        messages.push(decodeFrame(data.subarray(at, at + total)));
        at += total;
      }
    } catch (error) {
      if (!(error instanceof FrameError)) {
        throw error;
      }
      this.error = error;
      this.pending = [];
      this.pendingLength = 0;
      if (messages.length === 0) {
        throw error;
      }
      return messages;
    }
    // A copy, so that the chunk the host handed over is not kept alive by a view of it.
    const rest = data.slice(at);
    this.pending = rest.length > 0 ? [rest] : [];
    this.pendingLength = rest.length;
    this.wanted = wanted;
    return messages;
  }

  /** Ends the stream: throws `FrameError` when a frame was cut short (or an error is pending). */
  finish() {
    if (this.error) {
      throw this.error;
    }
    const partial = this.pendingLength;
    if (partial === 0) {
      return;
    }
    // The prelude was checked when it arrived: `wanted` is its total length.
    const expected = partial >= PRELUDE_LEN ? `of ${this.wanted}` : `of at least ${MIN_FRAME_LEN}`;
    throw new FrameError(`the stream ended inside a frame: ${partial} bytes ${expected} arrived`);
  }
}

function view(bytes) {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function hex(n) {
  return n.toString(16).padStart(8, '0');
}

/**
 * Checks a prelude (12 bytes): its CRC first, so that damaged lengths are reported as damage,
 * then that its lengths fit. Returns the frame's total length.
 */
function checkPrelude(prelude) {
  const fields = view(prelude);
  const declared = fields.getUint32(8);
  const actual = crc32(prelude.subarray(0, 8));
  if (declared !== actual) {
    throw new FrameError(
      `prelude checksum mismatch (the frame says ${hex(declared)}, its bytes give ${hex(actual)})`,
    );
  }
  const total = fields.getUint32(0);
  const headers = fields.getUint32(4);
  if (total < MIN_FRAME_LEN) {
    throw new FrameError(`frame length ${total} is below the ${MIN_FRAME_LEN}-byte minimum`);
  }
  if (total > MAX_FRAME_LEN) {
    throw new FrameError(`frame length ${total} is over the ${MAX_FRAME_LEN}-byte limit`);
  }
  if (headers > total - MIN_FRAME_LEN) {
    throw new FrameError(`headers length ${headers} does not fit in a frame of ${total} bytes`);
  }
  return total;
}

/** Decodes a whole frame whose prelude was checked. */
function decodeFrame(frame) {
  const covered = frame.subarray(0, frame.length - 4);
  const declared = view(frame).getUint32(frame.length - 4);
  const actual = crc32(covered);
  if (declared !== actual) {
    throw new FrameError(
      `message checksum mismatch (the frame says ${hex(declared)}, its bytes give ${hex(actual)})`,
    );
  }
  const headersEnd = PRELUDE_LEN + view(frame).getUint32(4);
  const headers = decodeHeaders(covered.subarray(PRELUDE_LEN, headersEnd));
  // A copy: the payload outlives the chunk it arrived in.
  return new Message(headers, covered.slice(headersEnd));
}

/** Fixed-size wire types: [size, what the value is called in errors, read]. */
const FIXED = {
  2: [1, 'a byte', (v) => v.getInt8(0)],
  3: [2, 'a short', (v) => v.getInt16(0)],
  4: [4, 'an int', (v) => v.getInt32(0)],
  5: [8, 'a long', (v) => v.getBigInt64(0)],
  8: [8, 'a timestamp', (v) => v.getBigInt64(0)],
  9: [16, 'a UUID', (v) => new Uint8Array(v.buffer.slice(v.byteOffset, v.byteOffset + 16))],
};

/** Reads the headers section, every header wholly inside it. */
function decodeHeaders(bytes) {
  const headers = [];
  let at = 0;
  const take = (length, what) => {
    const left = bytes.length - at;
    if (length > left) {
      throw new FrameError(
        `${what} runs past the end of the headers (${length} bytes wanted, ${left} left)`,
      );
    }
    at += length;
    return bytes.subarray(at - length, at);
  };
  while (at < bytes.length) {
    const nameLength = take(1, "a header name's length")[0];
    let name;
    try {
      name = utf8.decode(take(nameLength, 'a header name'));
    } catch (error) {
      if (error instanceof FrameError) {
        throw error;
      }
      throw new FrameError('a header name is not UTF-8');
    }
    const quoted = JSON.stringify(name);
    const what = (kind) => `the value of header ${quoted} (${kind})`;
    const type = take(1, what('its type'))[0];
    let value;
    if (type === 0 || type === 1) {
      value = type === 0;
    } else if (FIXED[type]) {
      const [size, kind, read] = FIXED[type];
      value = read(view(take(size, what(kind))));
    } else if (type === 6 || type === 7) {
      const length = view(take(2, what('its length'))).getUint16(0);
      const raw = take(length, what('its bytes'));
      if (type === 6) {
        value = raw.slice();
      } else {
        try {
          value = utf8.decode(raw);
        } catch {
          throw new FrameError(`header ${quoted} is a string but not UTF-8`);
        }
      }
    } else {
      throw new FrameError(`header ${quoted} has unknown value type ${type}`);
    }
    headers.push([name, value]);
  }
  return headers;
}

/** A value's wire type when the header does not name one. */
function wireType(value) {
  switch (typeof value) {
    case 'boolean':
      return value ? 0 : 1;
    case 'number':
      return 4;
    case 'bigint':
      return 5;
    case 'string':
      return 7;
    default:
      if (value instanceof Uint8Array) {
        return 6;
      }
      throw new TypeError(`no event-stream header type for ${value}`);
  }
}

/**
 * Encodes one frame: `headers` in order, then `payload`, with both checksums. For tests and fake
 * upstreams; `EventStreamParser` reads it back. A header is `[name, value]`, its wire type told by
 * the value's (boolean; number an int; bigint a long; Uint8Array bytes; string), or
 * `[name, value, wireType]` for the others (2 byte, 3 short, 8 timestamp, 9 UUID). Throws when the
 * format cannot carry it (a name over 255 bytes, a string or bytes value over 65535 bytes).
 *
 * @param {([string, any] | [string, any, number])[]} headers
 * @param {Uint8Array | string} payload
 * @returns {Uint8Array}
 */
export function encodeEventStream(headers, payload = new Uint8Array(0)) {
  const parts = [];
  for (const [name, value, type = wireType(value)] of headers) {
    const rawName = encoder.encode(name);
    if (rawName.length > 255) {
      throw new RangeError(`header name ${JSON.stringify(name)} is over 255 bytes`);
    }
    parts.push(Uint8Array.of(rawName.length), rawName, Uint8Array.of(type));
    if (type === 0 || type === 1) {
      continue;
    }
    if (type === 6 || type === 7) {
      const raw = typeof value === 'string' ? encoder.encode(value) : value;
      if (raw.length > 0xffff) {
        throw new RangeError(`the value of header ${JSON.stringify(name)} is over 65535 bytes`);
      }
      parts.push(Uint8Array.of(raw.length >> 8, raw.length & 0xff), raw);
      continue;
    }
    if (!FIXED[type]) {
      throw new RangeError(`unknown header type ${type}`);
    }
    const field = new Uint8Array(FIXED[type][0]);
    const fields = view(field);
    if (type === 2) fields.setInt8(0, value);
    else if (type === 3) fields.setInt16(0, value);
    else if (type === 4) fields.setInt32(0, value);
    else if (type === 9) field.set(value);
    else fields.setBigInt64(0, BigInt(value));
    parts.push(field);
  }
  const encodedHeaders = concatBytes(parts);
  const body = typeof payload === 'string' ? encoder.encode(payload) : payload;
  const total = MIN_FRAME_LEN + encodedHeaders.length + body.length;
  const frame = new Uint8Array(total);
  const fields = view(frame);
  fields.setUint32(0, total);
  fields.setUint32(4, encodedHeaders.length);
  fields.setUint32(8, crc32(frame.subarray(0, 8)));
  frame.set(encodedHeaders, PRELUDE_LEN);
  frame.set(body, PRELUDE_LEN + encodedHeaders.length);
  fields.setUint32(total - 4, crc32(frame.subarray(0, total - 4)));
  return frame;
}
