"""The `gateway-plugin` command (also `python -m gateway_plugin`).

- `gateway-plugin build DIR [--out FILE]`: builds the plugin in `DIR` (see `gateway_plugin.build`);
- `gateway-plugin bindings`: prints the directory of componentize-py's bindings of the bundled
  WIT, generating them when missing: put it on `MYPYPATH` to type-check a plugin.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import __version__
from ._bindings import directory
from .build import BuildError, build

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="gateway-plugin", description="Build and test gateway plugins written in Python."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    build_command = commands.add_parser(
        "build", help="build the plugin in DIR into a component (DIR/NAME.wasm by default)"
    )
    build_command.add_argument("dir", metavar="DIR", help="the plugin: plugin.toml and its module")
    build_command.add_argument("-o", "--out", metavar="FILE", help="where to write the component")
    build_command.add_argument("-q", "--quiet", action="store_true", help="no summary line")
    commands.add_parser(
        "bindings", help="print the directory of the WIT bindings (for MYPYPATH), made if missing"
    )
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            build(args.dir, args.out, quiet=args.quiet)
        else:
            print(directory())
    except (BuildError, ImportError) as e:
        print(f"gateway-plugin: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
