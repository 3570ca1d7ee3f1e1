// Server-Sent Events, the framing most streaming APIs use.

const LF = 10;
const CR = 13;
const COLON = 58;
const BOM = [0xef, 0xbb, 0xbf];

/**
 * One Server-Sent Event: its `event:` field (the type), its `data:` lines joined with `\n`, and its
 * `id:` field.
 *
 * @typedef {{event?: string, data: string, id?: string}} SseEvent
 */

/**
 * An incremental Server-Sent Events parser: feed it the body's bytes as they arrive, split
 * anywhere, and it returns the events completed so far. Lines may end in CRLF, LF or CR, lines
 * starting with `:` are comments, an event ends at a blank line and has at least one `data:` or
 * `event:` line; `retry:` and unknown fields are ignored. `finish()` at the end of the body gives a
 * last event that was not followed by a blank line.
 */
export class SseParser {
  constructor() {
    /** Bytes of the current, unterminated line. */
    this.line = new Uint8Array(0);
    /** The previous byte was a CR, so an LF right after it ends nothing. */
    this.afterCr = false;
    /** Whether the stream's first bytes were examined for a byte order mark. */
    this.started = false;
    this.pending = { event: undefined, data: undefined, id: undefined };
    this.decoder = new TextDecoder('utf-8', { ignoreBOM: true });
  }

  /**
   * Consumes the next bytes of the stream; returns the events they completed, in order.
   *
   * @param {Uint8Array} bytes
   * @returns {SseEvent[]}
   */
  push(bytes) {
    const events = [];
    let data = this.line.length === 0 ? bytes : concat(this.line, bytes);
    let start = 0;
    if (!this.started) {
      // The BOM may itself arrive split; wait until it can be decided.
      if (data.length < BOM.length && BOM.slice(0, data.length).every((b, i) => data[i] === b)) {
        this.line = data;
        return events;
      }
      this.started = true;
      if (BOM.every((b, i) => data[i] === b)) {
        start = BOM.length;
      }
    }
    if (this.afterCr && start < data.length) {
      this.afterCr = false;
      if (data[start] === LF) {
        start += 1;
      }
    }
    while (start < data.length) {
      const end = lineEnd(data, start);
      if (end < 0) {
        break;
      }
      this.endLine(data.subarray(start, end), events);
      start = end + 1;
      if (data[end] === CR) {
        if (start === data.length) {
          this.afterCr = true;
        } else if (data[start] === LF) {
          start += 1;
        }
      }
    }
    // A copy, so that the chunk the host handed over is not kept alive by a view of it.
    this.line = data.slice(start);
    return events;
  }

  /**
   * Ends the stream: the last event, if the stream stopped without the blank line that would have
   * completed it. The parser is then ready for a new stream.
   *
   * @returns {SseEvent | undefined}
   */
  finish() {
    if (this.line.length > 0 && this.started) {
      this.endLine(this.line, []);
    }
    const last = this.dispatch();
    Object.assign(this, new SseParser());
    return last;
  }

  endLine(line, events) {
    if (line.length === 0) {
      const event = this.dispatch();
      if (event) {
        events.push(event);
      }
      return;
    }
    if (line[0] === COLON) {
      return;
    }
    const colon = line.indexOf(COLON);
    let name;
    let value;
    if (colon < 0) {
      name = this.decoder.decode(line);
      value = '';
    } else {
      name = this.decoder.decode(line.subarray(0, colon));
      let from = colon + 1;
      if (line[from] === 32) {
        from += 1;
      }
      // Decoding whole lines keeps characters split across chunks intact.
      value = this.decoder.decode(line.subarray(from));
    }
    if (name === 'data') {
      this.pending.data = this.pending.data === undefined ? value : `${this.pending.data}\n${value}`;
    } else if (name === 'event') {
      this.pending.event = value;
    } else if (name === 'id' && !value.includes('\0')) {
      this.pending.id = value;
    }
  }

  dispatch() {
    const { event, data, id } = this.pending;
    this.pending = { event: undefined, data: undefined, id: undefined };
    if (data === undefined && event === undefined) {
      return undefined;
    }
    const dispatched = { data: data ?? '' };
    if (event !== undefined) {
      dispatched.event = event;
    }
    if (id !== undefined) {
      dispatched.id = id;
    }
    return dispatched;
  }
}

/** The index of the first CR or LF at or after `from`, or -1. */
function lineEnd(data, from) {
  const lf = data.indexOf(LF, from);
  const cr = data.indexOf(CR, from);
  if (lf < 0) {
    return cr;
  }
  return cr < 0 || lf < cr ? lf : cr;
}

function concat(a, b) {
  const joined = new Uint8Array(a.length + b.length);
  joined.set(a, 0);
  joined.set(b, a.length);
  return joined;
}
