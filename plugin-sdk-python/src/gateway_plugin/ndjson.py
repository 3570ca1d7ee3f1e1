"""Newline-delimited JSON (`application/x-ndjson`, JSON Lines): one JSON value a line, the
framing Ollama and some other servers stream in.

`Parser` is a pure incremental parser: feed it the body's bytes as they arrive, split anywhere,
and it returns each complete non-blank line as an `Event` whose `data` is the line (trimmed),
its `event` and `id` `None`, so that a decoder's `event` reads NDJSON as it reads SSE's
`data:` lines.

>>> parser = Parser()
>>> parser.push(b'{"a":1}\\r\\n\\n{"b"')
[Event(data='{"a":1}', event=None, id=None)]
>>> parser.push(b':2}')
[]
>>> parser.finish()
Event(data='{"b":2}', event=None, id=None)
"""


from .sse import Event

__all__ = ["Parser"]

_BOM = b"\xef\xbb\xbf"


class Parser:
    """Incremental NDJSON parser: lines end at LF (a CR before it is removed), blank lines are
    skipped, a leading UTF-8 byte order mark is removed. Call `finish` at the end of the body
    for a last line without its newline."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._line = bytearray()
        self._started = False

    def push(self, chunk: bytes) -> list[Event]:
        """Consumes the next bytes of the stream; returns the lines they completed, in order."""
        events: list[Event] = []
        line = self._line
        # The bytes kept from earlier pushes hold no newline: search only the new ones.
        searched = len(line)
        line += chunk
        if not self._started:
            # The byte order mark may itself arrive split: wait until it can be decided.
            if len(line) < len(_BOM) and _BOM.startswith(line):
                return events
            self._started = True
            searched = 0
            if line.startswith(_BOM):
                del line[: len(_BOM)]
        start = 0
        while True:
            end = line.find(b"\n", max(start, searched))
            if end < 0:
                break
            _add(events, line[start:end])
            start = end + 1
        del line[:start]
        return events

    def finish(self) -> Event | None:
        """Ends the stream: the last line if it had no newline. The parser is then ready for a
        new stream."""
        events: list[Event] = []
        if self._started:
            _add(events, self._line)
        self._reset()
        return events[0] if events else None


def _add(events: list[Event], line: bytes | bytearray) -> None:
    # Decoding whole lines keeps characters split across chunks intact; `strip` also takes
    # the CR of a CRLF.
    text = bytes(line).decode("utf-8", errors="replace").strip()
    if text:
        events.append(Event(data=text))
