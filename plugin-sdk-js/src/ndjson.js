// Newline-delimited JSON (`application/x-ndjson`, JSON Lines): one JSON value a line, the framing
// Ollama and some other servers stream in.

import { concatBytes } from './bytes.js';

const LF = 10;
const BOM = [0xef, 0xbb, 0xbf];

/**
 * An incremental NDJSON parser: feed it the body's bytes as they arrive, split anywhere, and it
 * returns each complete non-blank line as an event `{data}` (the line, trimmed; no `event` or
 * `id`), so that a decoder's `event` reads NDJSON as it reads SSE's `data:` lines. Lines end at LF
 * (a CR before it is removed with the line's other surrounding whitespace), blank lines are
 * skipped, a leading UTF-8 byte order mark is removed. `finish()` at the end of the body gives a
 * last line without its newline.
 */
export class NdjsonParser {
  constructor() {
    /** The chunks of the current line, which hold no LF. */
    this.pending = [];
    /** Whether the stream's first bytes were examined for a byte order mark. */
    this.started = false;
    this.decoder = new TextDecoder('utf-8', { ignoreBOM: true });
  }

  /**
   * Consumes the next bytes of the stream; returns the lines they completed, in order.
   *
   * @param {Uint8Array} bytes
   * @returns {import('./sse.js').SseEvent[]}
   */
  push(bytes) {
    const events = [];
    if (!this.started) {
      const head = concatBytes([...this.pending, bytes]);
      // The BOM may itself arrive split; wait until it can be decided.
      if (head.length < BOM.length && head.every((b, i) => b === BOM[i])) {
        this.pending = [head];
        return events;
      }
      this.started = true;
      this.pending = [];
      bytes = BOM.every((b, i) => head[i] === b) ? head.subarray(BOM.length) : head;
    }
    let start = 0;
    for (let end = bytes.indexOf(LF); end >= 0; end = bytes.indexOf(LF, start)) {
      const line = bytes.subarray(start, end);
      this.add(concatBytes([...this.pending, line]), events);
      this.pending = [];
      start = end + 1;
    }
    if (start < bytes.length) {
      // A copy, so that the chunk the host handed over is not kept alive by a view of it.
      this.pending.push(bytes.slice(start));
    }
    return events;
  }

  /**
   * Ends the stream: the last line, if it had no newline. The parser is then ready for a new
   * stream.
   *
   * @returns {import('./sse.js').SseEvent | undefined}
   */
  finish() {
    const events = [];
    if (this.started && this.pending.length > 0) {
      this.add(concatBytes(this.pending), events);
    }
    Object.assign(this, new NdjsonParser());
    return events[0];
  }

  add(line, events) {
    // Decoding whole lines keeps characters split across chunks intact; `trim` also takes the CR
    // of a CRLF.
    const data = this.decoder.decode(line).trim();
    if (data !== '') {
      events.push({ data });
    }
  }
}
