"""The gateway's log: lines a plugin writes land in the gateway's own log, with the call's
invocation id. `enabled` tells whether a line at a level would be kept, so a plugin can skip
building one that would be dropped.

>>> from gateway_plugin import log
>>> log.info("minted a token")              # doctest: +SKIP
"""

from wit_world.imports import log as _host

__all__ = ["trace", "debug", "info", "warn", "error", "enabled"]

Level = _host.Level


def _write(level: "_host.Level", message: str) -> None:
    _host.log(level, message)


def trace(message: str) -> None:
    _write(Level.TRACE, message)


def debug(message: str) -> None:
    _write(Level.DEBUG, message)


def info(message: str) -> None:
    _write(Level.INFO, message)


def warn(message: str) -> None:
    _write(Level.WARN, message)


def error(message: str) -> None:
    _write(Level.ERROR, message)


def enabled(level: "_host.Level") -> bool:
    """Whether a line at `level` (`log.Level.DEBUG`, ...) would be kept."""
    return _host.enabled(level)
