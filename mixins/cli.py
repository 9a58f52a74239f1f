"""The ``capture-trace`` console script: ``demo`` plus the analyzer commands.

Each command module adds its own sub-parser and sets ``func`` (returns the exit code), so this file
stays a dispatcher. Exit codes: 0 ok, 1 difference/inconsistency found, 2 bad input or usage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _version() -> str:
    from mixins.metadata import PACKAGE, distribution_version

    return distribution_version(PACKAGE) or "unknown"


def build_parser() -> argparse.ArgumentParser:
    from mixins import demo, doctor
    from mixins.analysis import cli as analysis_cli
    from mixins.helptext import HelpFormatter

    parser = argparse.ArgumentParser(
        prog="capture-trace",
        description="Record and inspect SGLang CUDA-graph capture traces.",
        epilog="Run 'capture-trace COMMAND --help' for its options, examples and exit codes.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    demo.add_command(commands)
    doctor.add_command(commands)
    analysis_cli.add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("capture-trace: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
