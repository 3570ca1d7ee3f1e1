"""An exception a plugin did not catch: a bug, which ends the call as a panic does in a Rust
plugin. The gateway's log gets it once, as one line: the exception's type and message and the
plugin's own frames (the SDK's are left out); then the instance traps, and the caller gets the
gateway's stable `plugin_error` (502) with the invocation id, never the exception's text, which
may quote anything the plugin was sent.

The trap is `os.abort()` (WASI's `abort` is the `unreachable` instruction): re-raising would let
componentize-py print the traceback a second time, and its own panic message after it.
"""

import os
import traceback
from typing import NoReturn

from . import log

__all__ = ["describe", "end"]

#: The SDK's own files, whose frames are not the plugin's.
_SDK_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
#: The most frames logged, innermost kept: the gateway cuts a log line at 4096 bytes.
MAX_FRAMES = 12


def describe(error: BaseException, who: str = "plugin") -> str:
    """`{who} raised TYPE: message`, then the frames of the plugin's own code (innermost last)
    as a traceback shows them; the innermost frame when none is the plugin's."""
    if isinstance(error, MemoryError):
        # Formatting allocates, and there is no memory left.
        return f"{who} raised MemoryError"
    exception = "".join(traceback.format_exception_only(type(error), error)).strip()
    frames = traceback.extract_tb(error.__traceback__)
    own = [frame for frame in frames if not frame.filename.startswith(_SDK_DIR)]
    lines = [f"{who} raised {exception}"]
    for frame in (own or frames[-1:])[-MAX_FRAMES:]:
        lines.append(f'  File "{frame.filename}", line {frame.lineno}, in {frame.name}')
        if frame.line:
            lines.append(f"    {frame.line.strip()}")
    return "\n".join(lines)


def _abort() -> NoReturn:
    os.abort()


def end(error: BaseException, who: str = "plugin") -> NoReturn:
    """Logs `error` (`describe`) at error level, then ends the instance."""
    try:
        log.error(describe(error, who))
    except BaseException:  # noqa: BLE001 (nothing more to do: the trap follows)
        pass
    _abort()
