"""Server-Sent Events, the framing most streaming APIs use.

`Parser` is a pure incremental parser: feed it the body's bytes as they arrive, split anywhere,
and it returns the events completed so far (the same rules as the Rust SDK's `sse::Parser`).

>>> parser = Parser()
>>> parser.push(b'data: {"a"')
[]
>>> [e.data for e in parser.push(b':1}\\r\\n\\r\\n: keep-alive\\n\\ndata: [DONE]')]
['{"a":1}']
>>> parser.finish().data
'[DONE]'
"""

from dataclasses import dataclass

__all__ = ["Event", "Parser"]

_BOM = b"\xef\xbb\xbf"


@dataclass
class Event:
    """One Server-Sent Event: its `data:` lines joined with `\\n`, its `event:` and `id:`."""

    data: str = ""
    event: str | None = None
    id: str | None = None


class Parser:
    """Incremental Server-Sent Events parser.

    Lines may end in CRLF, LF or CR; lines starting with `:` are comments; an event ends at a
    blank line and is produced when it has at least one `data:` or `event:` line. `retry:` and
    unknown fields are ignored. Call `finish` at the end of the body for a last event that was
    not followed by a blank line.
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._line = bytearray()
        self._after_cr = False
        self._started = False
        self._event: str | None = None
        self._data: list[str] | None = None
        self._id: str | None = None

    def push(self, chunk: bytes) -> list[Event]:
        """Consumes the next bytes of the stream; returns the events they completed, in order."""
        events: list[Event] = []
        data = bytes(chunk)
        if not self._started:
            head = bytes(self._line) + data[: len(_BOM)]
            # The byte order mark may itself arrive split: wait until it can be decided.
            if len(self._line) + len(data) < len(_BOM) and _BOM.startswith(head):
                self._line = bytearray(head)
                return events
            self._started = True
            if head.startswith(_BOM):
                data = data[len(_BOM) - len(self._line) :]
                self._line.clear()
        start = 0
        length = len(data)
        while start < length:
            if self._after_cr:
                self._after_cr = False
                if data[start] == 0x0A:
                    start += 1
                    continue
            # The next line end (LF or CR) from `start`.
            lf = data.find(b"\n", start)
            cr = data.find(b"\r", start)
            ends = [i for i in (lf, cr) if i >= 0]
            if not ends:
                self._line += data[start:]
                break
            end = min(ends)
            self._line += data[start:end]
            self._end_line(events)
            self._after_cr = data[end] == 0x0D
            start = end + 1
        return events

    def finish(self) -> Event | None:
        """Ends the stream: the last event if it was not followed by a blank line. The parser is
        then ready for a new stream."""
        if self._line:
            # A non-empty line never completes an event, so nothing is lost.
            self._end_line([])
        last = self._dispatch()
        self._reset()
        return last

    def _end_line(self, events: list[Event]) -> None:
        line = bytes(self._line)
        self._line.clear()
        if not line:
            event = self._dispatch()
            if event is not None:
                events.append(event)
            return
        if line[0] == 0x3A:  # ':' starts a comment
            return
        colon = line.find(b":")
        if colon < 0:
            name, value = line, b""
        else:
            name, value = line[:colon], line[colon + 1 :]
            if value.startswith(b" "):
                value = value[1:]
        # Decoding whole lines keeps characters split across chunks intact.
        text = value.decode("utf-8", errors="replace")
        if name == b"data":
            if self._data is None:
                self._data = [text]
            else:
                self._data.append(text)
        elif name == b"event":
            self._event = text
        elif name == b"id" and "\0" not in text:
            self._id = text

    def _dispatch(self) -> Event | None:
        data, event, id_ = self._data, self._event, self._id
        self._data, self._event, self._id = None, None, None
        if data is None and event is None:
            return None
        return Event(data="\n".join(data or []), event=event, id=id_)
