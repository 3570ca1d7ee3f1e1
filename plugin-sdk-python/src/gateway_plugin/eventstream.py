"""AWS event streams (`application/vnd.amazon.eventstream`), the binary framing Amazon Bedrock
streams its answers in (`ConverseStream`, `InvokeModelWithResponseStream`); the same rules as
the Rust SDK's `eventstream` module.

Each frame is one `Message`: a prelude (the frame's total length and its headers' length, both
`u32` big-endian, and a CRC32 of those 8 bytes), typed headers (`:event-type`,
`:message-type`, `:content-type`, ...), a payload, and a CRC32 of everything before it.

`Parser` is a pure incremental parser: feed it the body's bytes as they arrive, split anywhere,
and it returns the messages completed so far. `encode` writes frames, for tests and fake
upstreams.

>>> frame = encode([(":event-type", "contentBlockDelta"), (":message-type", "event")], b'{"t":1}')
>>> parser = Parser()
>>> parser.push(frame[:7])
[]
>>> message = parser.push(frame[7:])[0]
>>> (message.event_type, message.payload)
('contentBlockDelta', b'{"t":1}')
>>> parser.finish()
"""

import json
import struct
from binascii import crc32
from dataclasses import dataclass, field
from collections.abc import Sequence

__all__ = [
    "MAX_FRAME_LEN",
    "FrameError",
    "HeaderValue",
    "Message",
    "MessageException",
    "Parser",
    "encode",
]

# The largest frame `Parser` accepts (16 MiB, in the frame's declared length): a larger one is
# an error as soon as its prelude arrives. Bedrock's frames are a few hundred bytes.
MAX_FRAME_LEN = 16 * 1024 * 1024

# Total length, headers length, prelude CRC.
_PRELUDE_LEN = 12
# The prelude and the message CRC: a frame without headers or payload.
_MIN_FRAME_LEN = _PRELUDE_LEN + 4

# A header's value, by wire type: 0/1 `bool`; 2 (byte), 3 (short), 4 (int), 5 (long) and
# 8 (timestamp, milliseconds since the Unix epoch) `int`; 6 (bytes) and 9 (a UUID's 16 bytes)
# `bytes`; 7 `str`.
HeaderValue = bool | int | bytes | str

# Fixed-size wire types: (struct format, what the value is called in errors).
_FIXED = {
    2: (">b", "a byte"),
    3: (">h", "a short"),
    4: (">i", "an int"),
    5: (">q", "a long"),
    8: (">q", "a timestamp"),
    9: ("16s", "a UUID"),
}


def _quoted(name: str) -> str:
    return json.dumps(name, ensure_ascii=False)


class FrameError(ValueError):
    """A malformed event stream: a checksum that does not match, lengths that do not fit, an
    unknown header type, text that is not UTF-8, a frame over `MAX_FRAME_LEN`, or a body that
    ends inside a frame. The drivers report it as `ProviderError.malformed` (`failed`)."""


@dataclass
class MessageException:
    """An error the upstream sent inside the stream; see `Message.exception`. Its `str` is
    `kind: message` (or `kind` alone without a message)."""

    # `:exception-type` (e.g. `throttlingException`, `validationException`), else
    # `:error-code`, else the message type.
    kind: str
    # What the upstream says went wrong (may be empty).
    message: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}" if self.message else self.kind


@dataclass
class Message:
    """One message (frame) of an event stream: its headers in the order sent, its payload (JSON
    for Bedrock's events and exceptions)."""

    headers: list[tuple[str, HeaderValue]] = field(default_factory=list)
    payload: bytes = b""

    def header(self, name: str) -> HeaderValue | None:
        """The value of the first header named exactly `name` (the format's names are
        case-sensitive: `:event-type`, `:message-type`, `:exception-type`, ...)."""
        return next((value for n, value in self.headers if n == name), None)

    def str_header(self, name: str) -> str | None:
        """The value of the first header named `name` when it is a string."""
        value = self.header(name)
        return value if isinstance(value, str) else None

    @property
    def event_type(self) -> str | None:
        """`:event-type` (Bedrock's `messageStart`, `contentBlockDelta`, `metadata`, ...)."""
        return self.str_header(":event-type")

    @property
    def message_type(self) -> str | None:
        """`:message-type`: `event`, or `exception` / `error` for an error in the stream."""
        return self.str_header(":message-type")

    def exception(self) -> MessageException | None:
        """When the upstream sent an error in the stream instead of an event (`:message-type`
        `exception` or `error`): its kind and text. The kind is `:exception-type`, else
        `:error-code`, else the message type; the text is the payload's JSON `message` (or
        `Message`), else the `:error-message` header, else the payload itself (cut to 300
        characters)."""
        message_type = self.message_type
        if message_type not in ("exception", "error"):
            return None
        kind = self.str_header(":exception-type")
        if kind is None:
            kind = self.str_header(":error-code")
        if kind is None:
            kind = message_type
        text = _json_message(self.payload)
        if text is None:
            text = self.str_header(":error-message")
        if text is None:
            # An error message, not a place to quote a large payload.
            text = self.payload.decode("utf-8", errors="replace")[:300]
        return MessageException(kind, text)


def _json_message(payload: bytes) -> str | None:
    """The payload's JSON `message` (else `Message`) when it is a string."""
    try:
        parsed = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(parsed, dict):
        return None
    value = parsed["message"] if "message" in parsed else parsed.get("Message")
    return value if isinstance(value, str) else None


class Parser:
    """Incremental event-stream parser.

    Feed bytes in any split with `push`; every split gives the same messages and the same
    error. It keeps at most the frame being received, and never buffers one declared larger
    than `MAX_FRAME_LEN`. Call `finish` at the end of the body: bytes left over are a frame cut
    short. After an error the parser stays failed: every later `push` and `finish` raises the
    same error.
    """

    def __init__(self) -> None:
        # The start of the frame being received, when a push ended inside it.
        self._partial = bytearray()
        # The first error met, kept for every later call.
        self._error: FrameError | None = None

    def push(self, chunk: bytes) -> list[Message]:
        """Consumes the next bytes of the stream and returns the messages they completed, in
        order. A malformed frame raises `FrameError`; when messages were completed before it in
        the same bytes they are returned first, and the error comes from the next call (an
        empty `push` will do, or `finish`), so no message before the fault is lost."""
        if self._error is not None:
            raise self._error
        buffer = self._partial
        buffer += chunk
        messages: list[Message] = []
        at = 0
        try:
            while len(buffer) - at >= _PRELUDE_LEN:
                total = _check_prelude(buffer, at)
                if len(buffer) - at < total:
                    break
                messages.append(_decode_frame(bytes(buffer[at : at + total])))
                at += total
        except FrameError as error:
            self._error = error
            self._partial = bytearray()
            if not messages:
                raise
            return messages
        del buffer[:at]
        return messages

    def finish(self) -> None:
        """Ends the stream: raises `FrameError` when a frame was cut short (or an earlier error
        is pending)."""
        if self._error is not None:
            raise self._error
        partial = len(self._partial)
        if partial == 0:
            return
        if partial >= _PRELUDE_LEN:
            # The prelude was checked when it arrived.
            expected = f"of {struct.unpack_from('>I', self._partial)[0]}"
        else:
            expected = f"of at least {_MIN_FRAME_LEN}"
        raise FrameError(f"the stream ended inside a frame: {partial} bytes {expected} arrived")


def _check_prelude(buffer: bytearray, at: int) -> int:
    """Checks the prelude at `at`: its CRC first, so that damaged lengths are reported as
    damage, then that its lengths fit. Returns the frame's total length."""
    total, headers, declared = struct.unpack_from(">III", buffer, at)
    actual = crc32(memoryview(buffer)[at : at + 8])
    if declared != actual:
        raise FrameError(
            f"prelude checksum mismatch (the frame says {declared:08x}, its bytes give "
            f"{actual:08x})"
        )
    if total < _MIN_FRAME_LEN:
        raise FrameError(f"frame length {total} is below the {_MIN_FRAME_LEN}-byte minimum")
    if total > MAX_FRAME_LEN:
        raise FrameError(f"frame length {total} is over the {MAX_FRAME_LEN}-byte limit")
    if headers > total - _MIN_FRAME_LEN:
        raise FrameError(f"headers length {headers} does not fit in a frame of {total} bytes")
    return int(total)


def _decode_frame(frame: bytes) -> Message:
    """Decodes a whole frame whose prelude was checked."""
    covered = frame[:-4]
    (declared,) = struct.unpack(">I", frame[-4:])
    actual = crc32(covered)
    if declared != actual:
        raise FrameError(
            f"message checksum mismatch (the frame says {declared:08x}, its bytes give "
            f"{actual:08x})"
        )
    (headers_len,) = struct.unpack_from(">I", frame, 4)
    headers_end = _PRELUDE_LEN + headers_len
    return Message(_decode_headers(covered[_PRELUDE_LEN:headers_end]), covered[headers_end:])


class _Reader:
    """The headers section, read from the front; every header wholly inside it."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, length: int, what: str) -> bytes:
        left = len(self.data) - self.at
        if length > left:
            raise FrameError(
                f"{what} runs past the end of the headers ({length} bytes wanted, {left} left)"
            )
        self.at += length
        return self.data[self.at - length : self.at]


def _decode_headers(data: bytes) -> list[tuple[str, HeaderValue]]:
    headers: list[tuple[str, HeaderValue]] = []
    reader = _Reader(data)
    while reader.at < len(data):
        name_len = reader.take(1, "a header name's length")[0]
        try:
            name = reader.take(name_len, "a header name").decode("utf-8")
        except UnicodeDecodeError:
            raise FrameError("a header name is not UTF-8") from None

        def what(kind: str) -> str:
            return f"the value of header {_quoted(name)} ({kind})"

        value_type = reader.take(1, what("its type"))[0]
        value: HeaderValue
        if value_type in (0, 1):
            value = value_type == 0
        elif value_type in _FIXED:
            fmt, kind = _FIXED[value_type]
            (value,) = struct.unpack(fmt, reader.take(struct.calcsize(fmt), what(kind)))
        elif value_type in (6, 7):
            (length,) = struct.unpack(">H", reader.take(2, what("its length")))
            value = reader.take(length, what("its bytes"))
            if value_type == 7:
                try:
                    value = value.decode("utf-8")
                except UnicodeDecodeError:
                    raise FrameError(f"header {_quoted(name)} is a string but not UTF-8") from None
        else:
            raise FrameError(f"header {_quoted(name)} has unknown value type {value_type}")
        headers.append((name, value))
    return headers


def _wire_type(value: HeaderValue) -> int:
    if isinstance(value, bool):
        return 0 if value else 1
    if isinstance(value, int):
        return 5
    if isinstance(value, (bytes, bytearray)):
        return 6
    if isinstance(value, str):
        return 7
    raise TypeError(f"no event-stream header type for {type(value).__name__}")


def encode(
    headers: Sequence[tuple[str, HeaderValue] | tuple[str, HeaderValue, int]],
    payload: bytes = b"",
) -> bytes:
    """Encodes one frame: `headers` in order, then `payload`, with both checksums. For tests and
    fake upstreams; `Parser` reads it back.

    A header is `(name, value)`, its wire type told by the value's (`bool`; `int` a long;
    `bytes`; `str` a string), or `(name, value, wire_type)` for the others (2 byte, 3 short,
    4 int, 8 timestamp, 9 UUID). Raises `ValueError` when the format cannot carry it (a name
    over 255 bytes, a string or bytes value over 65535 bytes)."""
    encoded = bytearray()
    for header in headers:
        name, value = header[0], header[1]
        wire = header[2] if len(header) > 2 else _wire_type(value)
        raw_name = name.encode("utf-8")
        if len(raw_name) > 255:
            raise ValueError(f"header name {name!r} is over 255 bytes")
        encoded.append(len(raw_name))
        encoded += raw_name
        encoded.append(wire)
        if wire in (0, 1):
            pass
        elif wire in _FIXED:
            encoded += struct.pack(_FIXED[wire][0], value)
        elif wire in (6, 7):
            raw = value.encode("utf-8") if isinstance(value, str) else bytes(value)
            if len(raw) > 0xFFFF:
                raise ValueError(f"the value of header {name!r} is over 65535 bytes")
            encoded += struct.pack(">H", len(raw)) + raw
        else:
            raise ValueError(f"unknown header type {wire}")
    payload = bytes(payload)
    total = _MIN_FRAME_LEN + len(encoded) + len(payload)
    frame = bytearray(struct.pack(">II", total, len(encoded)))
    frame += struct.pack(">I", crc32(frame))
    frame += encoded
    frame += payload
    frame += struct.pack(">I", crc32(frame))
    return bytes(frame)
