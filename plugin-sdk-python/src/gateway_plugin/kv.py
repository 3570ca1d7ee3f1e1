"""State a plugin keeps between requests (each request has a fresh instance): an access token
minted by one request, used by the next ones until it expires. Entries belong to the route and
plugin of the call, live in one gateway process's memory and are bounded per route; values are
treated as secrets (never logged, recorded or counted).
"""

from typing import Optional

from wit_world.imports import kv as _host

__all__ = ["get", "set", "delete"]


def get(key: str) -> Optional[bytes]:
    """The value under `key`, unless it expired, was deleted or was evicted."""
    return _host.get(key)


def set(key: str, value: bytes, ttl_ms: int = 0) -> None:  # noqa: A001 (mirrors the WIT name)
    """Keeps `value` under `key` for `ttl_ms` milliseconds (0: until evicted)."""
    _host.set(key, bytes(value), ttl_ms)


def delete(key: str) -> None:
    _host.delete(key)
