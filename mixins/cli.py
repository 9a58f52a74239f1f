"""The ``capture-trace`` console script: ``demo`` plus the analyzer commands.

Each command module adds its own sub-parser and sets ``func`` (returns the exit code), so this file
stays a dispatcher. Exit codes: 0 ok, 1 difference/inconsistency found, 2 bad input or usage,
141 (``helptext.BROKEN_PIPE``) the reader of stdout went away, for every command.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from mixins.helptext import ANALYSIS_COMMANDS, BROKEN_PIPE, INTERRUPTED


class _Version(argparse.Action):
    """``--version``, looked up only when asked (package metadata costs ~25 ms to import)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from mixins.metadata import PACKAGE, distribution_version

        print(f"{parser.prog} {distribution_version(PACKAGE) or 'unknown'}")  # stdout, as argparse's own
        parser.exit()


class _Parser(argparse.ArgumentParser):
    """argparse's parser, except that ``--help`` lets a closed stdout be seen (argparse's own printing
    swallows ``OSError``), so that it exits 141 like every command's output; sub-commands inherit it."""

    def print_help(self, file: Any = None) -> None:
        (file or sys.stdout).write(self.format_help())


COMMANDS = ("demo", "doctor", *ANALYSIS_COMMANDS)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole CLI; or, given ``command``, a parser with only that sub-command, so that running one
    command imports only its own modules (``attribute --json`` starts in about half the time)."""
    from mixins.helptext import HelpFormatter

    parser = _Parser(
        prog="capture-trace",
        description="Record and inspect SGLang CUDA-graph capture traces.",
        epilog="Run 'capture-trace COMMAND --help' for its options, examples and exit codes.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action=_Version, help="show the installed version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    if command in (None, "demo"):
        from mixins import demo

        demo.add_command(commands)
    if command in (None, "doctor"):
        from mixins import doctor

        doctor.add_command(commands)
    if command is None or command not in ("demo", "doctor"):
        from mixins.analysis import cli as analysis_cli

        analysis_cli.add_commands(commands, only=command)
    return parser


def _drop_stdout() -> None:
    """After EPIPE: point descriptor 1 at /dev/null so the interpreter's final flush of what is still
    buffered neither fails nor prints "Exception ignored … BrokenPipeError" (the Python docs' recipe)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real descriptor (captured in-process): nothing to flush
        pass


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # The first word names the command (top-level options such as --help come first): build just it.
    # Anything else (a typo, no command) gets the whole parser and so argparse's usual message.
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    try:
        try:
            args = parser.parse_args(argv)
        finally:  # --help / --version print and exit inside parse_args: their closed pipe shows here too
            sys.stdout.flush()
        rc = int(args.func(args))
        sys.stdout.flush()  # an early-closed pipe shows here, not in the interpreter's exit
        return rc
    except BrokenPipeError:  # the reader of stdout went away (``… | head``): quietly, never 0 or 1
        _drop_stdout()
        return BROKEN_PIPE
    except KeyboardInterrupt:
        print("capture-trace: interrupted", file=sys.stderr)
        return INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
