"""Why a call failed, as the gateway's `provider-error` (see `wit/provider.wit`).

Raise a `ProviderError` anywhere in a provider; the SDK hands it to the gateway, which answers
the caller with its status: `invalid_request` 400, `upstream` 429 as 429 (with `Retry-After`),
400, 404, 413 and 422 as themselves (the provider refused the caller's request) and other
statuses 502, `failed` 502, `timeout` 504. Any other exception is a bug: the SDK logs it once
(`crash`) and ends the instance, as a panic does in a Rust plugin; the caller gets a 502
`plugin_error`.
"""

import json
from typing import Any

from wit_world.imports import types

__all__ = ["ProviderError", "upstream_error", "embedded_error"]

#: The longest provider message kept, in characters; error pages can be huge.
MAX_MESSAGE_CHARS = 1000


class ProviderError(Exception):
    """A provider's error: `kind` is `invalid_request`, `upstream`, `timeout` or `failed`."""

    def __init__(
        self,
        kind: str,
        message: str,
        status: int | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.retry_after = retry_after

    @classmethod
    def invalid_request(cls, message: str) -> "ProviderError":
        """The request cannot be served as given (unsupported type, bad parameter): 400."""
        return cls("invalid_request", message)

    @classmethod
    def upstream(
        cls, status: int, message: str, retry_after: int | None = None
    ) -> "ProviderError":
        """The upstream answered with an error status."""
        return cls("upstream", message, status=status, retry_after=retry_after)

    @classmethod
    def timeout(cls, message: str) -> "ProviderError":
        """The upstream did not answer in time: 504."""
        return cls("timeout", message)

    @classmethod
    def failed(cls, message: str) -> "ProviderError":
        """Anything else (transport failure, an answer the plugin cannot read): 502."""
        return cls("failed", message)

    @classmethod
    def malformed(cls, error: Any) -> "ProviderError":
        """An upstream answer the plugin cannot read; `error` should not quote the answer."""
        return cls.failed(f"malformed response from upstream: {error}")

    def to_wit(self) -> types.ProviderError:
        """The WIT variant the gateway receives."""
        if self.kind == "invalid_request":
            return types.ProviderError_InvalidRequest(self.message)
        if self.kind == "upstream":
            return types.ProviderError_Upstream(
                types.UpstreamError(int(self.status or 500), self.message, self.retry_after)
            )
        if self.kind == "timeout":
            return types.ProviderError_Timeout(self.message)
        return types.ProviderError_Failed(self.message)

    def __repr__(self) -> str:
        status = f", status={self.status}" if self.status is not None else ""
        return f"ProviderError({self.kind}{status}: {self.message!r})"


def _truncate(message: str) -> str:
    return message[:MAX_MESSAGE_CHARS]


def _json_message(body: bytes) -> str | None:
    try:
        value = json.loads(body)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    error = value.get("error")
    message = error.get("message") if isinstance(error, dict) else error
    if not isinstance(message, str):
        message = value.get("message")
    if not isinstance(message, str) or not message.strip():
        return None
    return message.strip()


def _retry_after(value: str | None) -> int | None:
    """Delay-seconds (a fraction rounded up); HTTP dates become the seconds until then."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        seconds = None
    if seconds is not None:
        if seconds != seconds or seconds < 0:
            return None
        whole = int(seconds)
        return min(whole + (1 if seconds > whole else 0), 2**32 - 1)
    try:
        from email.utils import parsedate_to_datetime
        import time

        date = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    wait = date.timestamp() - time.time()
    if wait <= 0:
        return 0
    return min(int(wait) + (1 if wait > int(wait) else 0), 2**32 - 1)


def upstream_error(status: int, body: bytes, retry_after: str | None = None) -> ProviderError:
    """`ProviderError.upstream` from an error answer, as the Rust SDK's `upstream_error`.

    The message is the body's `{"error": {"message"}}`, `{"error": "..."}` or `{"message"}`,
    else the body text itself (trimmed), cut to 1000 characters; an empty body gives a message
    naming the status. `retry_after` is the `Retry-After` header's value.
    """
    message = _json_message(body)
    if message is None:
        message = bytes(body).decode("utf-8", errors="replace").strip()
    if not message:
        message = f"the provider answered HTTP {status} without a message"
    return ProviderError.upstream(status, _truncate(message), _retry_after(retry_after))


_GOOGLE_STATUSES = {
    "INVALID_ARGUMENT": 400,
    "FAILED_PRECONDITION": 400,
    "OUT_OF_RANGE": 400,
    "UNAUTHENTICATED": 401,
    "PERMISSION_DENIED": 403,
    "NOT_FOUND": 404,
    "RESOURCE_EXHAUSTED": 429,
    "UNAVAILABLE": 503,
    "DEADLINE_EXCEEDED": 504,
}


def embedded_error(error: Any) -> ProviderError:
    """`ProviderError.upstream` from an error reported inside a successful answer (mid-stream,
    or a 200 answer holding `error`): its `message`, its `code` when an HTTP error status, else
    the status of a Google canonical `status` name, else 500."""
    if isinstance(error, str):
        message = error
    elif isinstance(error, dict) and str(error.get("message") or "").strip():
        message = str(error["message"])
    else:
        message = json.dumps(error, separators=(",", ":"))
    status = None
    if isinstance(error, dict):
        code = error.get("code")
        if isinstance(code, str):
            code = code.strip()
            code = int(code) if code.isdigit() else None
        if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
            status = code
        name = error.get("status")
        if status is None and isinstance(name, str):
            status = _GOOGLE_STATUSES.get(name)
    return ProviderError.upstream(status or 500, _truncate(message))
