"""Outbound HTTP through the gateway (the `http` import of the provider and tool worlds):
`Request` built with chained calls, `send()` returning a `Response` whose body is read as it
arrives. Failures are `ProviderError`s: `timeout`, or `failed` (a forbidden host among them).
Only the hosts the gateway allows the plugin are reachable: a route's `base_url` and
`allowed_hosts`, or a tool server's `allowed_hosts`.
"""

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from componentize_py_types import Err
from wit_world.imports import http as _http

from . import log
from . import eventstream, ndjson
from .errors import ProviderError, upstream_error
from .sse import Event, Parser

__all__ = ["NDJSON_TYPES", "Request", "Response"]

# The media types `Response.is_ndjson` recognizes as newline-delimited JSON.
NDJSON_TYPES = (
    "application/x-ndjson",
    "application/ndjson",
    "application/jsonl",
    "application/x-jsonlines",
    "application/jsonlines",
)


def _http_error(error: Any, doing: str) -> ProviderError:
    """The host's HTTP errors, as the Rust SDK maps them."""
    if isinstance(error, _http.HttpError_Timeout):
        return ProviderError.timeout(
            f"the provider did not answer in time ({doing}): {error.value}"
        )
    if isinstance(error, _http.HttpError_ForbiddenHost):
        return ProviderError.failed(
            f"the gateway does not allow requests to {error.value}; "
            "only a route's base_url and allowed_hosts, or a tool server's allowed_hosts, "
            "are reachable"
        )
    if isinstance(error, _http.HttpError_TooLarge):
        return ProviderError.failed(
            f"the provider's answer is larger than the gateway allows ({error.value} bytes)"
        )
    if isinstance(error, _http.HttpError_Transport):
        return ProviderError.failed(f"HTTP failure {doing}: {error.value}")
    return ProviderError.failed(f"invalid HTTP request: {getattr(error, 'value', error)}")


class Request:
    """An outbound HTTP request, built with chained calls and performed by `send`. Only the
    hosts the gateway allows the plugin are reachable."""

    def __init__(self, method: str, url: str) -> None:
        self.method = method
        self.url = url
        self.headers: list[tuple[str, str]] = []
        self.body = b""

    @classmethod
    def post(cls, url: str) -> "Request":
        return cls("POST", url)

    @classmethod
    def get(cls, url: str) -> "Request":
        return cls("GET", url)

    def header(self, name: str, value: str) -> "Request":
        """Adds a header (headers with the same name are all sent)."""
        self.headers.append((name, value))
        return self

    def replace_header(self, name: str, value: str) -> "Request":
        lower = name.lower()
        self.headers = [(n, v) for n, v in self.headers if n.lower() != lower]
        return self.header(name, value)

    def header_value(self, name: str) -> str | None:
        lower = name.lower()
        return next((v for n, v in self.headers if n.lower() == lower), None)

    def bearer(self, key: str) -> "Request":
        return self.replace_header("authorization", f"Bearer {key}")

    def api_key(self, key: str | None, header: str | None = None) -> "Request":
        """Adds the provider key when there is one (local servers often need none): in
        `header` (e.g. `x-api-key`), or as `Authorization: Bearer` when `header` is None."""
        if not key:
            return self
        return self.header(header, key) if header else self.bearer(key)

    def streaming(self, stream: bool) -> "Request":
        """`Accept: text/event-stream` when `stream`, else `application/json`."""
        return self.replace_header("accept", "text/event-stream" if stream else "application/json")

    def json(self, value: Any) -> "Request":
        """The body as JSON, with `Content-Type: application/json`."""
        self.body = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
        return self.replace_header("content-type", "application/json")

    def send(self) -> "Response":
        """Sends the request through the gateway; returns once status and headers arrived.
        Every status is a successful send (see `Response.error_for_status`); failures are
        `ProviderError.timeout` or `ProviderError.failed` (a forbidden host among them)."""
        request = _http.Request(self.method, self.url, list(self.headers), bytes(self.body))
        try:
            response = _http.send(request)
        except Err as e:
            raise _http_error(e.value, "sending the request") from None
        return Response(response.status, list(response.headers), _HostBody(response.body))

    def send_logged(self) -> "Response":
        """`send`, first logging the request line at debug level when the gateway keeps debug
        lines (headers and body are never logged)."""
        if log.enabled(log.Level.DEBUG):
            log.debug(f"{self.method} {self.url}")
        return self.send()

    def __repr__(self) -> str:
        # Header names only: values carry the provider key.
        names = [n for n, _ in self.headers]
        return f"Request({self.method} {self.url}, headers={names}, body={len(self.body)} bytes)"


class _HostBody:
    """The host's `incoming-body`, released as soon as it ends or fails."""

    def __init__(self, body: Any) -> None:
        self._body = body

    def read(self) -> bytes | None:
        if self._body is None:
            return None
        try:
            chunk: bytes | None = self._body.read()
        except Err as e:
            self.close()
            raise _http_error(e.value, "reading the answer") from None
        if chunk is None:
            self.close()
        return chunk

    def close(self) -> None:
        body, self._body = self._body, None
        if body is not None:
            body.__exit__(None, None, None)


class _ChunkBody:
    def __init__(self, chunks: Iterable[bytes]) -> None:
        self._chunks = list(chunks)

    def read(self) -> bytes | None:
        return self._chunks.pop(0) if self._chunks else None


class Response:
    """A response: status and headers, and a body read in chunks as it arrives."""

    def __init__(self, status: int, headers: list[tuple[str, str]], body: Any) -> None:
        self.status = status
        self.headers = headers
        self._body = body

    @classmethod
    def from_chunks(
        cls, status: int, headers: Sequence[tuple[str, str]], chunks: Iterable[bytes]
    ) -> "Response":
        """A response whose body is `chunks`: for testing a provider without the gateway."""
        return cls(status, list(headers), _ChunkBody(chunks))

    def header(self, name: str) -> str | None:
        lower = name.lower()
        return next((v for n, v in self.headers if n.lower() == lower), None)

    def is_success(self) -> bool:
        return 200 <= self.status < 300

    def is_json(self) -> bool:
        """Whether `Content-Type` says JSON, `application/json` with any parameters (a server
        that ignored the request to stream). The media type itself: `application/jsonl` is
        newline-delimited JSON, not JSON."""
        return self.media_type() == "application/json"

    def media_type(self) -> str:
        """`Content-Type` without its parameters, lowercase (`""` without one)."""
        return (self.header("content-type") or "").split(";", 1)[0].strip().lower()

    def is_ndjson(self) -> bool:
        """Whether `Content-Type` says newline-delimited JSON (`application/x-ndjson`,
        `application/ndjson`, `application/jsonl`, `application/x-jsonlines`,
        `application/jsonlines`; any parameters and letter case), which `ndjson` reads."""
        return self.media_type() in NDJSON_TYPES

    def is_event_stream(self) -> bool:
        """Whether `Content-Type` says an AWS event stream (`application/vnd.amazon.eventstream`,
        any parameters and letter case), which `event_stream` reads."""
        return self.media_type() == "application/vnd.amazon.eventstream"

    def chunks(self) -> Iterator[bytes]:
        """The body's chunks as they arrive (`ProviderError` when reading fails)."""
        while True:
            chunk = self._body.read()
            if chunk is None:
                return
            if chunk:
                yield bytes(chunk)

    def read(self) -> bytes:
        """The whole body."""
        return b"".join(self.chunks())

    def json(self) -> Any:
        """The body parsed as JSON (`ProviderError.malformed` when it is not)."""
        try:
            return json.loads(self.read())
        except ValueError as e:
            raise ProviderError.malformed(e) from None

    def error_for_status(self) -> "Response":
        """The response itself when its status is 2xx; else raises `ProviderError.upstream`
        with the status, the provider's message and the `Retry-After` seconds."""
        if self.is_success():
            return self
        try:
            body = self.read()
        except ProviderError:
            # The status says what matters; a body that fails to arrive only costs the message.
            body = b""
        raise upstream_error(self.status, body, self.header("retry-after"))

    def sse(self) -> Iterator[Event]:
        """The body as Server-Sent Events, each yielded once complete."""
        parser = Parser()
        for chunk in self.chunks():
            yield from parser.push(chunk)
        last = parser.finish()
        if last is not None:
            yield last

    def ndjson(self) -> Iterator[Event]:
        """The body as newline-delimited JSON: each non-blank line, once complete, as an `Event`
        whose `data` is the line (a last line without its newline included)."""
        parser = ndjson.Parser()
        for chunk in self.chunks():
            yield from parser.push(chunk)
        last = parser.finish()
        if last is not None:
            yield last

    def event_stream(self) -> Iterator[eventstream.Message]:
        """The body as AWS event-stream messages, each yielded once its frame is whole. A
        malformed frame or a body that ends inside a frame raises `ProviderError.malformed`
        (`failed`: "malformed response from upstream: invalid event stream: ...") after the
        messages before it."""
        parser = eventstream.Parser()
        try:
            for chunk in self.chunks():
                yield from parser.push(chunk)
                # A fault after those messages is held back until the next push: ask now.
                parser.push(b"")
            parser.finish()
        except eventstream.FrameError as e:
            raise ProviderError.malformed(f"invalid event stream: {e}") from None
