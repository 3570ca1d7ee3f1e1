import assert from 'node:assert/strict';
import { test } from 'node:test';

import {
  ProviderError,
  embeddedError,
  parseRetryAfter,
  upstreamError,
} from '../src/errors.js';

test("upstream errors take the provider's message", () => {
  const openai = '{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}';
  assert.deepEqual(upstreamError(401, openai).toWit(), {
    tag: 'upstream',
    val: { status: 401, message: 'Incorrect API key provided', retryAfter: undefined },
  });
  assert.equal(upstreamError(400, '{"error":"bad model"}').message, 'bad model');
  assert.equal(upstreamError(400, '{"message":"nope"}').message, 'nope');
  assert.equal(upstreamError(502, '  <html>Bad gateway</html>\n').message, '<html>Bad gateway</html>');
  assert.equal(upstreamError(500, '{"error":{"code":1}}').message, '{"error":{"code":1}}');
  assert.match(upstreamError(503, '').message, /503/);
  assert.equal(Array.from(upstreamError(500, 'é'.repeat(3000)).message).length, 1000);
  assert.equal(upstreamError(429, '', '7').retryAfter, 7);
});

test('retry-after in seconds and as dates', () => {
  assert.equal(parseRetryAfter('20'), 20);
  assert.equal(parseRetryAfter(' 7 '), 7);
  assert.equal(parseRetryAfter('1.2'), 2);
  assert.equal(parseRetryAfter('-1'), undefined);
  assert.equal(parseRetryAfter('4294967296'), 4294967295);
  assert.equal(parseRetryAfter('1e30'), 4294967295);
  assert.equal(parseRetryAfter('NaN'), undefined);
  assert.equal(parseRetryAfter(undefined), undefined);
  const date = Date.UTC(2015, 9, 21, 7, 28, 0);
  assert.equal(parseRetryAfter('Wed, 21 Oct 2015 07:28:00 GMT', date - 90_000), 90);
  assert.equal(parseRetryAfter('Wed, 21 Oct 2015 07:28:00 GMT', date - 1500), 2);
  assert.equal(parseRetryAfter('Wed, 21 Oct 2015 07:28:00 GMT', date + 5000), 0);
  assert.equal(parseRetryAfter('Wednesday, 21-Oct-15 07:28:00 GMT', date - 60_000), 60);
  assert.equal(parseRetryAfter('Wed Oct 21 07:28:00 2015', date - 60_000), 60);
  for (const garbage of ['soon', 'Thu, 21 Oct 2015 07:28:00 GMT', 'Wed, 21 Oct 2015 07:28:00 PST']) {
    assert.equal(parseRetryAfter(garbage, date), undefined, garbage);
  }
});

test('embedded errors', () => {
  const status = (error) => embeddedError(error).status;
  assert.equal(status({ message: 'bad', code: 400 }), 400);
  assert.equal(status({ message: 'x', code: '429' }), 429);
  assert.equal(status({ message: 'x', code: 200 }), 500);
  assert.equal(status({ message: 'x', status: 'RESOURCE_EXHAUSTED' }), 429);
  assert.equal(embeddedError('plain').message, 'plain');
  assert.equal(embeddedError({ message: ' ' }).message, '{"message":" "}');
});

test('provider errors as the WIT says them', () => {
  assert.deepEqual(ProviderError.invalidRequest('no').toWit(), {
    tag: 'invalid-request',
    val: 'no',
  });
  assert.deepEqual(ProviderError.timeout('slow').toWit(), { tag: 'timeout', val: 'slow' });
});
