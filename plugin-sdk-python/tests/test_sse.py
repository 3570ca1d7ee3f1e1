"""The SSE parser: every split of a stream gives the same events (as the Rust SDK's tests)."""

import doctest
import unittest

from gateway_plugin import sse
from gateway_plugin.sse import Event, Parser


def parse_in_pieces(stream, size):
    parser = Parser()
    events = []
    for start in range(0, len(stream), size):
        events.extend(parser.push(stream[start : start + size]))
    last = parser.finish()
    if last is not None:
        events.append(last)
    return events


class ParserTest(unittest.TestCase):
    def test_every_split_gives_the_same_events(self):
        stream = (
            "\ufeff: hello\r\nevent: delta\r\nid: 7\r\ndata: {\"t\":\"héllo\"}\r\n\r\n"
            "data: a\ndata:b\ndata:  c\n\n"
            "data: cr\r\rdata: last"
        ).encode()
        expected = [
            Event('{"t":"héllo"}', "delta", "7"),
            Event("a\nb\n c"),
            Event("cr"),
            Event("last"),
        ]
        for size in range(1, len(stream) + 1):
            self.assertEqual(parse_in_pieces(stream, size), expected, f"pieces of {size}")

    def test_crlf_split_between_pushes_is_one_line_end(self):
        parser = Parser()
        self.assertEqual(parser.push(b"data: x\r"), [])
        self.assertEqual(parser.push(b"\n"), [])
        self.assertEqual(parser.push(b"\r\n"), [Event("x")])

    def test_comments_unknown_fields_and_empty_data(self):
        events = parse_in_pieces(b": ping\n\n:\nretry: 100\nfoo: bar\n\ndata: x\n\n", 64)
        self.assertEqual(events, [Event("x")])
        self.assertEqual(parse_in_pieces(b"data\n\ndata:\ndata:\n\n", 64), [Event(""), Event("\n")])
        self.assertEqual(parse_in_pieces(b"event: ping\n\n", 64), [Event("", "ping")])

    def test_only_a_leading_bom_is_removed(self):
        self.assertEqual(parse_in_pieces(b"\xef\xbb\xbfdata: a\n\n", 1), [Event("a")])
        self.assertEqual(parse_in_pieces(b"\xef\xbbdata: a\n\n", 1), [])

    def test_doctest(self):
        self.assertEqual(doctest.testmod(sse).failed, 0)


if __name__ == "__main__":
    unittest.main()
