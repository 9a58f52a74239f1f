"""The ``capture-trace`` console script: ``demo``, ``doctor`` and the analyzer commands. Each command module
adds its own sub-parser and sets ``func`` (returns the exit code, ``mixins.usage``), so this file stays a
dispatcher; ``--version`` and ``--help`` import no command module (docs/DESIGN.md §7.6, "Start-up").
"""

from __future__ import annotations

import os
import sys

from mixins.usage import BROKEN_PIPE, INTERRUPTED, OK, PROG, version_line
from mixins.usage import COMMANDS as SUMMARIES

TYPE_CHECKING = False  # not typing's: importing it is ~10% of ``--version``
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

COMMANDS = tuple(SUMMARIES)  # every sub-command, in --help order


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Given ``command``, a parser with only that sub-command, so that running one command imports only its
    own modules (``attribute --json`` starts in about half the time). Without one, the top level: every
    command listed by name and summary (``usage.COMMANDS``), none of their modules imported; enough for
    ``--help``, ``--version`` and argparse's message for a missing or mistyped command."""
    from mixins.helptext import HelpFormatter, Parser, VersionAction

    parser = Parser(
        prog=PROG,
        description="Record and inspect SGLang CUDA-graph capture traces.",
        epilog="Run 'capture-trace COMMAND --help' for its options, examples and exit codes.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action=VersionAction, help="show the installed version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    if command is None:
        for name, summary in SUMMARIES.items():
            commands.add_parser(name, help=summary, add_help=False)
    elif command == "demo":
        from mixins import demo

        demo.add_command(commands)
    elif command == "doctor":
        from mixins import doctor

        doctor.add_command(commands)
    else:
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
    try:
        if argv == ["--version"]:  # no parser at all: argparse's help formatter alone imports shutil
            print(version_line())
            sys.stdout.flush()
            return OK
        # The first word names the command (top-level options such as --help come first): build just it.
        # Anything else (a typo, no command) gets the top level and so argparse's usual message.
        parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
        try:
            args = parser.parse_args(argv)
            if not hasattr(args, "func"):  # a command named after top-level words (``-- summary x``): its parser
                args = build_parser(args.command).parse_args(argv)
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
