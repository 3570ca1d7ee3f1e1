"""Stream framings beside SSE: newline-delimited JSON and AWS event streams, parsed in every
split and read through the drivers (as the Rust SDK's tests)."""

import doctest
import json
import struct
import unittest
from binascii import crc32
from unittest import mock

import fake_host  # noqa: F401 (the log, natively)
from wit_world.imports import http, types

from gateway_plugin import ProviderError, eventstream, ndjson, usage
from gateway_plugin.eventstream import MAX_FRAME_LEN, FrameError, Message, encode
from gateway_plugin.provider import (
    FRAMINGS,
    HttpProvider,
    Message as ProviderMessage,
    Request,
    Response,
    Sink,
    StreamDecoder,
    provider_world,
    read_stream,
)
from gateway_plugin.sse import Event

from test_provider import call, iter_body


def pieces(body, size):
    return [body[at : at + size] for at in range(0, len(body), size)]


def splits(body):
    """Every way of cutting `body` in two, and in pieces of every size."""
    for at in range(len(body) + 1):
        yield [body[:at], body[at:]]
    for size in range(1, len(body) + 1):
        yield pieces(body, size)


def response(chunks, content_type):
    headers = [] if content_type is None else [("Content-Type", content_type)]
    return Response.from_chunks(200, headers, chunks)


class Ollama(StreamDecoder):
    """Ollama-like NDJSON lines: `{"t": text}`, then `{"done": true, "usage": [P, C]}`."""

    def body(self, data, answer):
        line = json.loads(data)
        if "t" in line:
            answer.text(0, line["t"])
        if line.get("done"):
            answer.usage(usage(*line["usage"]))
            answer.finish_reason(0, "stop")
            answer.complete()


def sent(sink):
    return [([d.text for d in c.deltas], c.usage and c.usage.total_tokens) for c in sink.sent]


NDJSON = (
    '\ufeff{"t":"Hé"}\r\n'
    "\n"
    '   {"t":"llo"}  \n'
    "\r\n"
    ' \t \n'
    '{"t":" wörld"}\n'
    '{"done":true,"usage":[3,2]}'
).encode()


class NdjsonParserTest(unittest.TestCase):
    def parse(self, chunks):
        parser = ndjson.Parser()
        events = [e for chunk in chunks for e in parser.push(chunk)]
        last = parser.finish()
        return events + ([last] if last is not None else [])

    def test_every_split_gives_the_same_lines(self):
        expected = [
            Event('{"t":"Hé"}'),
            Event('{"t":"llo"}'),
            Event('{"t":" wörld"}'),
            Event('{"done":true,"usage":[3,2]}'),
        ]
        for chunks in splits(NDJSON):
            self.assertEqual(self.parse(chunks), expected, [len(c) for c in chunks])

    def test_lines_end_at_lf_only(self):
        # A CR alone ends nothing (it is trimmed at the line's end); a CRLF split is one end.
        self.assertEqual(self.parse([b"a\rb\r", b"\nc"]), [Event("a\rb"), Event("c")])
        self.assertEqual(self.parse([b""]), [])
        self.assertEqual(self.parse([b"\n\n \r\n"]), [])

    def test_only_a_leading_bom_is_removed(self):
        self.assertEqual(self.parse([b"\xef", b"\xbb", b"\xbf1\n"]), [Event("1")])
        self.assertEqual(self.parse([b"1\n\xef\xbb\xbf2\n"]), [Event("1"), Event("\ufeff2")])

    def test_doctest(self):
        self.assertEqual(doctest.testmod(ndjson).failed, 0)


class NdjsonStreamTest(unittest.TestCase):
    def test_every_split_reads_the_same_answer(self):
        for chunks in splits(NDJSON):
            sink = Sink.buffered()
            completion = read_stream(
                response(chunks, "application/x-ndjson; charset=utf-8"), sink, "m", Ollama()
            )
            self.assertEqual(completion.choices[0].text, "Héllo wörld")
            self.assertEqual(completion.usage, usage(3, 2))
            self.assertEqual(completion.choices[0].finish_reason, types.FinishReason_Stop())
            # Each line's text reaches the caller as soon as the line is whole.
            self.assertEqual(sent(sink), [(["Hé"], None), (["llo"], None), ([" wörld"], None), ([], 5)])

    def test_auto_detects_every_ndjson_type(self):
        for content_type in [
            "application/x-ndjson",
            "Application/NDJSON",
            "application/jsonl; charset=utf-8",
            " application/x-jsonlines ;q=1",
            "application/jsonlines",
        ]:
            completion = read_stream(response([NDJSON], content_type), Sink.buffered(), "m", Ollama())
            self.assertEqual(completion.choices[0].text, "Héllo wörld", content_type)

    def test_done_ends_and_the_default_event_reads_json(self):
        body = b'{"t":"a"}\n{"t":"b"}\n[DONE]\nnot json\n'
        sink = Sink.buffered()
        completion = read_stream(response([body], "application/x-ndjson"), sink, "m", Ollama())
        self.assertEqual(completion.choices[0].text, "ab")
        self.assertEqual(sent(sink), [(["a"], None), (["b"], None)])

    def test_a_stream_cut_short_is_an_error(self):
        sink = Sink.buffered()
        with self.assertRaises(ProviderError) as caught:
            read_stream(response([b'{"t":"a"}\n{"t":"b"}'], "application/x-ndjson"), sink, "m", Ollama())
        self.assertEqual(caught.exception.message, "stream ended early")
        self.assertEqual(sent(sink), [(["a"], None), (["b"], None)])

    def test_forced_framing_over_a_misleading_content_type(self):
        body = b'{"t":"a"}\n{"t":"b"}\n{"done":true,"usage":[1,1]}\n'
        for content_type in ["application/json", "text/plain", "text/event-stream", None]:
            sink = Sink.buffered()
            completion = read_stream(response(pieces(body, 5), content_type), sink, "m", Ollama(), "ndjson")
            self.assertEqual(completion.choices[0].text, "ab", content_type)
            self.assertEqual(len(sink.sent), 3, content_type)
        # Unforced, the same body labelled JSON is one whole answer, which is not JSON.
        with self.assertRaises(json.JSONDecodeError):
            read_stream(response([body], "application/json"), Sink.buffered(), "m", Ollama())

    def test_json_stays_one_whole_answer(self):
        # JSON is the media type itself, parameters aside: `application/jsonl` is not JSON.
        self.assertFalse(response([b""], "application/jsonl").is_json())
        for content_type in ["application/json", "Application/JSON; charset=utf-8"]:
            sink = Sink.buffered()
            completion = read_stream(
                response([b'{"t":"ab",', b'"done":true,"usage":[1,1]}'], content_type), sink, "m", Ollama()
            )
            self.assertEqual(completion.choices[0].text, "ab")
            self.assertEqual(sent(sink), [(["ab"], 2)])

    def test_forced_sse_reads_sse_under_any_type(self):
        body = b'data: {"t":"a"}\n\ndata: {"done":true,"usage":[1,1]}\n\n'
        completion = read_stream(response([body], "application/x-ndjson"), Sink.buffered(), "m", Ollama(), "sse")
        self.assertEqual(completion.choices[0].text, "a")

    def test_an_unknown_framing_is_the_plugins_bug(self):
        self.assertEqual(FRAMINGS, ("auto", "sse", "ndjson", "eventstream"))
        with self.assertRaises(ValueError):
            read_stream(response([b""], None), Sink.buffered(), "m", Ollama(), "jsonl")


# ---------------------------------------------------------------------------- event streams


def frame(event_type, payload):
    headers = [
        (":event-type", event_type),
        (":content-type", "application/json"),
        (":message-type", "event"),
    ]
    return encode(headers, payload.encode())


def exception(kind, message):
    headers = [
        (":exception-type", kind),
        (":content-type", "application/json"),
        (":message-type", "exception"),
    ]
    return encode(headers, json.dumps({"message": message}).encode())


class Bedrock(StreamDecoder):
    """Bedrock-like messages: `delta` carries text, `stop` completes, `metadata` usage; the rest
    through the default `message` (and `body`)."""

    def body(self, data, answer):
        self.bodies = getattr(self, "bodies", []) + [bytes(data)]

    def message(self, message, answer):
        payload = json.loads(message.payload) if message.payload else None
        if message.event_type == "delta":
            answer.text(0, payload["t"])
        elif message.event_type == "stop":
            answer.finish_reason(0, "stop")
            answer.complete()
        elif message.event_type == "metadata":
            answer.usage(usage(*payload["usage"]))
        else:
            super().message(message, answer)


def resign(data):
    """Both checksums of a one-frame `data` made right after its bytes were changed."""
    data = bytearray(data)
    data[8:12] = struct.pack(">I", crc32(data[:8]))
    data[-4:] = struct.pack(">I", crc32(data[:-4]))
    return bytes(data)


def prelude(total, headers):
    head = struct.pack(">II", total, headers)
    return head + struct.pack(">I", crc32(head))


def parse(chunks):
    """Every message and the error's text (`None` when the stream ended well)."""
    parser = eventstream.Parser()
    messages = []
    try:
        for chunk in chunks:
            messages.extend(parser.push(chunk))
        parser.finish()
    except FrameError as e:
        return messages, str(e)
    return messages, None


def error_of(data):
    messages, error = parse([data])
    assert error is not None, messages
    return error


STREAM = [
    frame("messageStart", '{"role":"assistant"}'),
    frame("delta", '{"t":"Hé"}'),
    frame("delta", '{"t":"llo"}'),
    frame("stop", "{}"),
    frame("metadata", '{"usage":[3,2]}'),
]


class EventStreamParserTest(unittest.TestCase):
    def test_known_frames(self):
        # Frames other implementations of the format produce for these inputs.
        bare = encode([], b'{"foo": "bar"}')
        self.assertEqual(list(bare[:12]), [0, 0, 0, 30, 0, 0, 0, 0, 186, 242, 246, 138])
        self.assertEqual(list(bare[26:]), [174, 114, 88, 228])
        typed = encode([("content-type", "application/json")], b'{"foo": "bar"}')
        self.assertEqual(list(typed[:12]), [0, 0, 0, 62, 0, 0, 0, 32, 64, 93, 249, 70])
        self.assertEqual(list(typed[58:]), [111, 162, 191, 59])
        self.assertEqual(len(encode([], b"")), 16)

    def test_every_header_type_round_trips(self):
        headers = [
            ("true", True, 0),
            ("false", False, 1),
            ("byte", -7, 2),
            ("short", -300, 3),
            ("int", -70000, 4),
            ("long", -(2**63) + 1, 5),
            ("bytes", b"\x00\xff\x01", 6),
            ("string", "héllo", 7),
            ("timestamp", 1764201600000, 8),
            ("uuid", b"0123456789abcdef", 9),
            ("empty", "", 7),
        ]
        data = encode(headers, b"{}")
        messages, error = parse([data])
        self.assertIsNone(error)
        self.assertEqual(messages, [Message([(n, v) for n, v, _ in headers], b"{}")])
        # Typed by their values: bool, int (a long), bytes, str.
        self.assertEqual(encode([(n, v) for n, v, _ in headers[:2]]), encode(headers[:2]))
        self.assertEqual(encode([("n", 5)]), encode([("n", 5, 5)]))

    def test_every_split_gives_the_same_messages(self):
        data = b"".join(STREAM)
        whole = parse([data])
        self.assertEqual(len(whole[0]), 5)
        self.assertIsNone(whole[1])
        for chunks in splits(data):
            self.assertEqual(parse(chunks), whole)

    def test_headers_are_looked_up_by_exact_name(self):
        m = Message([(":event-type", "messageStart"), (":event-type", "ignored"), ("n", 1)], b"")
        self.assertEqual(m.event_type, "messageStart")
        self.assertIsNone(m.str_header(":Event-Type"))
        self.assertEqual(m.header("n"), 1)
        self.assertIsNone(m.str_header("n"))
        self.assertIsNone(m.message_type)
        self.assertIsNone(m.exception())

    def test_exceptions_and_errors(self):
        throttled = Message(
            [(":message-type", "exception"), (":exception-type", "throttlingException")],
            b'{"message":"Too many requests"}',
        )
        self.assertEqual(throttled.exception().kind, "throttlingException")
        self.assertEqual(str(throttled.exception()), "throttlingException: Too many requests")
        capital = Message([(":message-type", "exception")], b'{"Message":"Big"}')
        self.assertEqual(str(capital.exception()), "exception: Big")
        error = Message(
            [(":message-type", "error"), (":error-code", "InternalFailure"), (":error-message", "broke")],
            b"",
        )
        self.assertEqual(str(error.exception()), "InternalFailure: broke")
        bare = Message([(":message-type", "exception")], b"x" * 1000).exception()
        self.assertEqual((bare.kind, len(bare.message)), ("exception", 300))
        self.assertEqual(str(Message([(":message-type", "error")], b"").exception()), "error")
        self.assertIsNone(Message([(":message-type", "event")], b"{}").exception())

    def test_bad_checksums(self):
        data = encode([(":event-type", "messageStop")], b"{}")
        damaged = bytearray(data)
        damaged[9] ^= 0x10
        self.assertTrue(error_of(bytes(damaged)).startswith("prelude checksum mismatch"))
        damaged = bytearray(data)
        damaged[-6] ^= 0x10
        self.assertTrue(error_of(bytes(damaged)).startswith("message checksum mismatch"))
        # A damaged length is caught by the prelude's checksum, not trusted.
        damaged = bytearray(data)
        damaged[3] = 0xFF
        self.assertTrue(error_of(bytes(damaged)).startswith("prelude checksum mismatch"))

    def test_lengths_that_do_not_fit(self):
        self.assertEqual(error_of(prelude(15, 0)), "frame length 15 is below the 16-byte minimum")
        data = bytearray(encode([], b"abcd"))
        data[4:8] = struct.pack(">I", 5)
        self.assertEqual(error_of(resign(data)), "headers length 5 does not fit in a frame of 20 bytes")
        data = bytearray(encode([("s", "abc")], b""))
        data[4:8] = struct.pack(">I", 6)
        self.assertIn("runs past the end of the headers", error_of(resign(data)))

    def test_oversized_frames_fail_before_they_are_buffered(self):
        parser = eventstream.Parser()
        with self.assertRaises(FrameError) as caught:
            parser.push(prelude(MAX_FRAME_LEN + 1, 0))
        self.assertIn("over the 16777216-byte limit", str(caught.exception))
        # Failed for good, and nothing kept.
        self.assertEqual(len(parser._partial), 0)
        with self.assertRaises(FrameError) as again:
            parser.push(b"more")
        self.assertIs(again.exception, caught.exception)
        with self.assertRaises(FrameError):
            parser.finish()
        # The limit itself is allowed (only the prelude arrives here).
        self.assertEqual(eventstream.Parser().push(prelude(MAX_FRAME_LEN, 0)), [])

    def test_unknown_types_and_bad_text(self):
        data = bytearray(encode([("h", True)], b""))
        data[14] = 10
        self.assertEqual(error_of(resign(data)), 'header "h" has unknown value type 10')
        data = bytearray(encode([("h", "ab")], b""))
        data[17] = 0xFF
        self.assertEqual(error_of(resign(data)), 'header "h" is a string but not UTF-8')
        data = bytearray(encode([("h", True)], b""))
        data[13] = 0xC3
        self.assertEqual(error_of(resign(data)), "a header name is not UTF-8")
        # Bytes need not be UTF-8.
        self.assertIsNone(parse([encode([("h", b"\xff")], b"")])[1])

    def test_a_stream_cut_short(self):
        data = encode([(":event-type", "messageStop")], b"{}")
        self.assertEqual(
            parse([data[:5]])[1], "the stream ended inside a frame: 5 bytes of at least 16 arrived"
        )
        cut = data[:-1]
        self.assertEqual(
            parse([cut])[1], f"the stream ended inside a frame: {len(cut)} bytes of {len(data)} arrived"
        )
        self.assertEqual(parse([]), ([], None))

    def test_messages_before_a_fault_are_kept(self):
        good = encode([], b"1")
        bad = bytearray(encode([], b"2"))
        bad[13] ^= 1
        parser = eventstream.Parser()
        self.assertEqual(len(parser.push(good + bytes(bad) + good)), 1)
        with self.assertRaises(FrameError) as caught:
            parser.push(b"")
        self.assertTrue(str(caught.exception).startswith("message checksum mismatch"))

    def test_any_damaged_byte_is_an_error_in_every_split(self):
        data = b"".join(STREAM[:2])
        for at in range(len(data)):
            damaged = bytearray(data)
            damaged[at] ^= 0x41
            whole = parse([bytes(damaged)])
            self.assertIsNotNone(whole[1], at)
            for size in (1, 3, 7, 40):
                self.assertEqual(parse(pieces(bytes(damaged), size)), whole, (at, size))

    def test_doctest(self):
        self.assertEqual(doctest.testmod(eventstream).failed, 0)


def aws(chunks, content_type="application/vnd.amazon.eventstream"):
    return response(chunks, content_type)


class EventStreamTest(unittest.TestCase):
    def test_every_split_reads_the_same_answer(self):
        data = b"".join(STREAM)
        for chunks in splits(data):
            sink = Sink.buffered()
            decoder = Bedrock()
            completion = read_stream(aws(chunks, "Application/vnd.amazon.eventstream; x=1"), sink, "m", decoder)
            self.assertEqual(completion.choices[0].text, "Héllo")
            self.assertEqual(completion.usage, usage(3, 2))
            # Each message's text reaches the caller as soon as its frame is whole.
            self.assertEqual(sent(sink), [(["Hé"], None), (["llo"], None), ([], 5)])
            # The default `message` read `messageStart` with `body`.
            self.assertEqual(decoder.bodies, [b'{"role":"assistant"}'])

    def test_forced_eventstream_over_a_misleading_content_type(self):
        data = b"".join(STREAM)
        for content_type in ["application/octet-stream", "application/json", "text/event-stream", None]:
            completion = read_stream(aws(pieces(data, 9), content_type), Sink.buffered(), "m", Bedrock(), "eventstream")
            self.assertEqual(completion.choices[0].text, "Héllo", content_type)

    def test_an_exception_fails_the_call(self):
        data = frame("delta", '{"t":"Hel"}') + exception("modelStreamErrorException", "the model broke") + STREAM[3]
        sink = Sink.buffered()
        with self.assertRaises(ProviderError) as caught:
            read_stream(aws([data]), sink, "m", Bedrock())
        e = caught.exception
        self.assertEqual((e.kind, e.message), ("failed", "modelStreamErrorException: the model broke"))
        self.assertEqual(sent(sink), [(["Hel"], None)])

    def test_damaged_frames_fail_the_call(self):
        first = frame("delta", '{"t":"Hel"}')
        for at, says in [(9, "prelude checksum mismatch"), (-1, "message checksum mismatch")]:
            damaged = bytearray(frame("delta", '{"t":"lo"}'))
            damaged[at] ^= 0x40
            data = first + bytes(damaged) + STREAM[3]
            for chunks in splits(data):
                sink = Sink.buffered()
                with self.assertRaises(ProviderError) as caught:
                    read_stream(aws(chunks), sink, "m", Bedrock())
                e = caught.exception
                self.assertEqual(e.kind, "failed")
                self.assertTrue(
                    e.message.startswith(f"malformed response from upstream: invalid event stream: {says}"),
                    e.message,
                )
                # The frame before the damage was read and sent.
                self.assertEqual(sent(sink), [(["Hel"], None)])

    def test_a_frame_cut_in_the_middle(self):
        data = b"".join(STREAM[:4])
        cut = STREAM[4][:10]
        with self.assertRaises(ProviderError) as caught:
            read_stream(aws([data, cut]), Sink.buffered(), "m", Bedrock())
        self.assertEqual(
            caught.exception.message,
            "malformed response from upstream: invalid event stream: "
            "the stream ended inside a frame: 10 bytes of at least 16 arrived",
        )
        # Whole frames without the one that completes: cut off.
        with self.assertRaises(ProviderError) as caught:
            read_stream(aws([b"".join(STREAM[:3])]), Sink.buffered(), "m", Bedrock())
        self.assertEqual(caught.exception.message, "stream ended early")


class Ndjsonic(HttpProvider):
    """An `HttpProvider` naming its framing: its server labels NDJSON `application/json`."""

    NAME = "ndjson-py"
    FRAMING = "ndjson"

    def request(self, call, stream):
        return Request.post(f"{call.base_url()}/chat").json({"stream": stream})

    def body(self, data, answer):
        Ollama().body(data, answer)


class Bedrocky(HttpProvider):
    NAME = "aws-py"
    FRAMING = "eventstream"

    def request(self, call, stream):
        return Request.post(f"{call.base_url()}/converse-stream").json({})

    def body(self, data, answer):
        pass

    def message(self, message, answer):
        Bedrock().message(message, answer)


class ProviderFramingTest(unittest.TestCase):
    def stream(self, provider, chunks, content_type):
        answer = http.Response(200, [("content-type", content_type)], iter_body(chunks))
        sent = []
        with mock.patch.object(http, "send", return_value=answer):
            with mock.patch("wit_world.imports.sink.send", side_effect=sent.append):
                completion = provider_world(provider)().complete_stream(call().request)
        return completion, sent

    def test_the_class_framing_reaches_the_driver(self):
        self.assertEqual(HttpProvider.FRAMING, "auto")
        self.assertIs(ProviderMessage, Message)
        body = b'{"t":"a"}\n{"t":"b"}\n{"done":true,"usage":[2,1]}\n'
        completion, sent = self.stream(Ndjsonic, pieces(body, 4), "application/json")
        self.assertEqual(completion.choices[0].text, "ab")
        self.assertEqual([[d.text for d in c.deltas] for c in sent], [["a"], ["b"], []])

        completion, sent = self.stream(Bedrocky, pieces(b"".join(STREAM), 11), "text/plain")
        self.assertEqual((completion.choices[0].text, completion.usage), ("Héllo", usage(3, 2)))
        self.assertEqual(len(sent), 3)


if __name__ == "__main__":
    unittest.main()
