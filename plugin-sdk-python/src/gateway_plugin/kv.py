"""State a plugin keeps between requests (each request has a fresh instance): an access token
minted by one request, used by the next ones until it expires. Entries belong to the route and
plugin of the call, live in one gateway process's memory and are bounded per route; values are
treated as secrets (never logged, recorded or counted). A credential the plugin mints is also
declared with `secret`, so that the gateway redacts it from what the route's requests answer,
record and log; `get_or_refresh` does both.
"""

from collections.abc import Callable

from wit_world.imports import kv as _host

__all__ = ["get", "set", "delete", "secret", "get_or_refresh", "SECRET_GRACE_MS"]


def get(key: str) -> bytes | None:
    """The value under `key`, unless it expired, was deleted or was evicted."""
    return _host.get(key)


def set(key: str, value: bytes, ttl_ms: int = 0) -> None:  # noqa: A001 (mirrors the WIT name)
    """Keeps `value` under `key` for `ttl_ms` milliseconds (0: until evicted)."""
    _host.set(key, bytes(value), ttl_ms)


def delete(key: str) -> None:
    _host.delete(key)


def secret(value: str, ttl_ms: int = 0) -> None:
    """Declares `value` a secret of the route for `ttl_ms` milliseconds (0: until the route's
    plugins have declared 64 newer ones): from now on, this request included, the gateway
    replaces it with `[redacted]` in everything the route's requests answer, record and log.
    Call it for every credential the plugin mints and sends upstream. A value shorter than 8
    bytes or longer than 16 KiB is not taken (the gateway logs a warning)."""
    _host.secret(value, max(0, int(ttl_ms)))


# How long after its time to live a value `get_or_refresh` minted is still redacted: a request
# that read it just before it expired may still be answering with it.
SECRET_GRACE_MS = 15 * 60 * 1000


def get_or_refresh(
    key: str, mint: Callable[[], tuple[str | bytes, int]]
) -> bytes:
    """The value under `key`; when there is none, `mint()` returns `(value, ttl_ms)`: the value
    is declared `secret` (when it is text) for its lifetime and `SECRET_GRACE_MS` more, kept for
    `ttl_ms` (0: not kept, used once) and returned. An exception of `mint` keeps nothing."""
    kept = get(key)
    if kept is not None:
        return kept
    value, ttl_ms = mint()
    raw = value.encode() if isinstance(value, str) else bytes(value)
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        text = None
    if text is not None:
        secret(text, ttl_ms + SECRET_GRACE_MS if ttl_ms > 0 else 0)
    if ttl_ms > 0:
        set(key, raw, ttl_ms)
    return raw
