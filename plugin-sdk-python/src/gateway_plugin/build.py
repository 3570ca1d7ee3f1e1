"""`gateway-plugin build DIR [--out FILE]`: the plugin in `DIR` as a WebAssembly component,
built with componentize-py against the WIT bundled in this package.

`DIR/plugin.toml` says what to build: `name` (the component is `NAME.wasm`, the plugin's name
in routes; default the directory's name), `world` (`provider`, `guard` or `tool`; default
`provider`) and `module` (the Python module defining `WitWorld`; default `app`). Without `out`
the component goes to `DIR/NAME.wasm`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ._bindings import WIT_DIR, WORLDS, componentize_py

__all__ = ["BuildError", "Manifest", "build"]


class BuildError(Exception):
    """A plugin that cannot be built: its manifest, or componentize-py's failure."""


@dataclass(frozen=True)
class Manifest:
    """What `plugin.toml` says of a plugin."""

    name: str
    world: str = "provider"
    module: str = "app"

    @classmethod
    def read(cls, directory: str | os.PathLike[str]) -> Manifest:
        """`directory/plugin.toml`, with the defaults for what it leaves out (or a missing
        file)."""
        path = Path(directory) / "plugin.toml"
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = ""
        except OSError as e:
            raise BuildError(f"cannot read {path}: {e}") from None
        fallback = Path(directory).resolve().name or "plugin"
        try:
            return cls.parse(text, fallback)
        except BuildError as e:
            raise BuildError(f"{path}: {e}") from None

    @classmethod
    def parse(cls, text: str, fallback_name: str) -> Manifest:
        try:
            table = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise BuildError(f"invalid TOML: {e}") from None
        values = {"name": fallback_name, "world": "provider", "module": "app"}
        for key, value in table.items():
            if key not in values:
                raise BuildError(f"unknown key `{key}` (name, world, module)")
            if not isinstance(value, str):
                raise BuildError(f"`{key}` must be a string")
            values[key] = value
        manifest = cls(**values)
        if manifest.world not in WORLDS:
            raise BuildError(
                f"world `{manifest.world}`: the gateway's worlds are `provider`, `guard` and `tool`"
            )
        if not re.fullmatch(r"[A-Za-z0-9_-]+", manifest.name):
            raise BuildError(
                f"name `{manifest.name}`: letters, digits, `-` and `_` only (it names NAME.wasm)"
            )
        return manifest


def build(
    directory: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    *,
    quiet: bool = False,
) -> Path:
    """Builds the plugin in `directory` to `out` (default `directory/NAME.wasm`) and returns
    its path. The component is written under a temporary name and renamed, so that a gateway
    watching the directory never loads half a file."""
    source = Path(directory)
    if not source.is_dir():
        raise BuildError(f"{source} is not a directory")
    manifest = Manifest.read(source)
    target = Path(out) if out is not None else source / f"{manifest.name}.wasm"
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.tmp")
    # The directory holding this package: the repository's `src` or a site-packages.
    sdk = Path(__file__).resolve().parent.parent
    command = componentize_py(
        "--quiet", "-d", WIT_DIR, "-w", manifest.world,
        "componentize", manifest.module, "-p", source, "-p", sdk, "-o", temporary,
    )  # fmt: skip
    # Only the two paths above first: not whatever virtual environment the caller activated.
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    started = time.monotonic()
    done = subprocess.run(command, env=env, check=False)
    if done.returncode != 0:
        temporary.unlink(missing_ok=True)
        raise BuildError(
            f"componentize-py failed to build the plugin in {source} (exit {done.returncode})"
        )
    os.replace(temporary, target)
    if not quiet:
        size = target.stat().st_size / 1e6
        elapsed = time.monotonic() - started
        print(
            f"gateway-plugin: built {target} ({manifest.world} world, {size:.1f} MB) "
            f"in {elapsed:.1f} s",
            file=sys.stderr,
        )
    return target
