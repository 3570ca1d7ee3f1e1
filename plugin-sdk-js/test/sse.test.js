import assert from 'node:assert/strict';
import { test } from 'node:test';

import { SseParser } from '../src/sse.js';

const encoder = new TextEncoder();

/** Parses `stream` fed in pieces of `size` bytes, `finish` included. */
function parseInPieces(stream, size) {
  const bytes = encoder.encode(stream);
  const parser = new SseParser();
  const events = [];
  for (let at = 0; at < bytes.length; at += size) {
    events.push(...parser.push(bytes.subarray(at, at + size)));
  }
  const last = parser.finish();
  return last ? [...events, last] : events;
}

test('events end at blank lines', () => {
  const parser = new SseParser();
  assert.deepEqual(parser.push(encoder.encode('data: one\n\ndata: two\n\n')), [
    { data: 'one' },
    { data: 'two' },
  ]);
  assert.equal(parser.finish(), undefined);
});

test('every split gives the same events', () => {
  const stream =
    '\ufeff: hello\r\nevent: delta\r\nid: 7\r\ndata: {"t":"héllo"}\r\n\r\n' +
    'data: a\ndata:b\ndata:  c\n\n' +
    'data: cr\r\rdata: last';
  const expected = [
    { event: 'delta', data: '{"t":"héllo"}', id: '7' },
    { data: 'a\nb\n c' },
    { data: 'cr' },
    { data: 'last' },
  ];
  for (let size = 1; size <= encoder.encode(stream).length; size += 1) {
    assert.deepEqual(parseInPieces(stream, size), expected, `pieces of ${size}`);
  }
});

test('a CRLF split between pushes is one line end', () => {
  const parser = new SseParser();
  assert.deepEqual(parser.push(encoder.encode('data: x\r')), []);
  assert.deepEqual(parser.push(encoder.encode('\n')), []);
  assert.deepEqual(parser.push(encoder.encode('\r\n')), [{ data: 'x' }]);
});

test('comments and unknown fields are ignored; events without data are kept', () => {
  assert.deepEqual(parseInPieces(': ping\n\n:\nretry: 100\nfoo: bar\n\ndata: x\n\n', 64), [
    { data: 'x' },
  ]);
  assert.deepEqual(parseInPieces('data\n\ndata:\ndata:\n\n', 64), [{ data: '' }, { data: '\n' }]);
  assert.deepEqual(parseInPieces('event: ping\n\n', 64), [{ event: 'ping', data: '' }]);
});
