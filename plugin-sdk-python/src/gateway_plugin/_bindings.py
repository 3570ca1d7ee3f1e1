"""componentize-py's bindings of the bundled WIT, natively: what a plugin's modules import
(`wit_world`, `componentize_py_types`) when they run in a unit test instead of a component.

Inside a component componentize-py generates these modules at build time. Natively they are
generated on first import with the same componentize-py (`componentize-py bindings`, for the
three worlds at once) into a cache directory keyed by the WIT and componentize-py's version, so
that a test runs on exactly the dataclasses the gateway passes. A `wit_world` already on
`sys.path` (the repository's own test setup) is used as it is.

The cache is `$GATEWAY_PLUGIN_BINDINGS_DIR`, else `$XDG_CACHE_HOME/gateway-plugin/bindings`
(`~/.cache/...`), else a directory under the system's temporary directory.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from importlib import metadata
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

__all__ = ["WIT_DIR", "WORLDS", "directory", "install", "componentize_py"]

#: The WIT package this SDK targets, shipped inside it.
WIT_DIR = Path(__file__).resolve().parent / "wit"
#: The gateway's worlds.
WORLDS = ("provider", "guard", "tool")
#: The top-level modules `componentize-py bindings` writes.
_MODULES = frozenset(
    {"wit_world", "componentize_py_types", "componentize_py_async_support", "poll_loop"}
)


def componentize_py(*args: str | os.PathLike[str]) -> list[str]:
    """The command line running the componentize-py installed beside this package with `args`
    (through this interpreter: no `componentize-py` on `PATH` needed)."""
    run = "import componentize_py, sys; sys.argv[0] = 'componentize-py'; componentize_py.script()"
    return [sys.executable, "-c", run, *(os.fspath(arg) for arg in args)]


def _key() -> str:
    digest = hashlib.sha256()
    try:
        digest.update(metadata.version("componentize-py").encode())
    except metadata.PackageNotFoundError:
        pass
    for wit in sorted(WIT_DIR.glob("*.wit")):
        digest.update(wit.name.encode() + b"\0" + wit.read_bytes())
    return digest.hexdigest()[:16]


def _cache_roots() -> list[Path]:
    chosen = os.environ.get("GATEWAY_PLUGIN_BINDINGS_DIR")
    if chosen:
        return [Path(chosen)]
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    user = getattr(os, "getuid", lambda: "user")()
    return [
        Path(xdg) / "gateway-plugin" / "bindings",
        Path(tempfile.gettempdir()) / f"gateway-plugin-bindings-{user}",
    ]


def _generate(target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    # Generated beside the target and renamed into place: a concurrent test run sees either no
    # bindings or whole ones.
    partial = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        command = componentize_py("--quiet", "-d", WIT_DIR, *_world_args(WORLDS), "bindings")
        done = subprocess.run(
            [*command, partial / "out"], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise ImportError(
                "gateway_plugin: generating the WIT bindings with componentize-py failed:\n"
                + (done.stderr or done.stdout).strip()
            )
        try:
            os.replace(partial / "out", target)
        except OSError:
            if not (target / "wit_world").is_dir():
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _world_args(worlds: Sequence[str]) -> list[str]:
    return [arg for world in worlds for arg in ("-w", world)]


_directory: Path | None = None


def directory() -> Path:
    """The directory holding the bindings, generated when missing."""
    global _directory
    if _directory is not None:
        return _directory
    key = _key()
    failures = []
    for root in _cache_roots():
        target = root / key
        if (target / "wit_world").is_dir():
            _directory = target
            return target
        try:
            _generate(target)
        except OSError as e:
            failures.append(f"{target}: {e}")
            continue
        _directory = target
        return target
    raise ImportError(
        "gateway_plugin: no writable directory for the WIT bindings ("
        + "; ".join(failures)
        + "); set GATEWAY_PLUGIN_BINDINGS_DIR"
    )


class _Finder:
    """Finds the generated modules when nothing earlier on `sys.meta_path` does."""

    def find_spec(
        self,
        name: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        if name not in _MODULES:
            return None
        return importlib.machinery.PathFinder.find_spec(name, [str(directory())])


def install() -> None:
    """Lets `import wit_world` find the generated bindings (once; last on `sys.meta_path`, so
    that bindings already on `sys.path` win)."""
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.append(_Finder())
