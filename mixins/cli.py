"""The ``capture-trace`` console script: ``demo`` plus the analyzer commands.

Each command module adds its own sub-parser and sets ``func`` (returns the exit code), so this file
stays a dispatcher. Exit codes (``mixins.helptext``): 0 ok, 1 difference/inconsistency found, 2 bad input
or usage, 141 (``BROKEN_PIPE``) the reader of stdout went away, for every command.

Start-up: ``--version`` and ``--help`` are answered from this module and ``mixins.helptext`` alone (the
command list is a table there; the version is read from our ``*.dist-info``), so they import no command
module, no ``importlib.metadata`` and no numpy; naming a command imports that command's modules only.
"""

from __future__ import annotations

import argparse
import os
import sys

from _sglang_capture_trace_switches import DISTRIBUTION
from mixins.helptext import BROKEN_PIPE, INTERRUPTED, OK
from mixins.helptext import COMMANDS as SUMMARIES

TYPE_CHECKING = False  # not typing's: importing it is ~10% of ``--version``
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

PROG = "capture-trace"

COMMANDS = tuple(SUMMARIES)  # every sub-command, in --help order


def installed_version() -> str | None:
    """Our version as ``importlib.metadata.version`` finds it (the first ``*.dist-info`` of this
    distribution on ``sys.path``), read from its ``METADATA`` directly: importing ``importlib.metadata``
    alone costs about as much as the whole interpreter's start-up."""
    wanted = DISTRIBUTION.replace("-", "_")
    for entry in sys.path:
        folder = entry or "."
        try:
            names = os.listdir(folder)
        except OSError:  # a zip, a missing or unreadable entry
            continue
        for name in names:
            project, _, rest = name.partition("-")
            if not rest.endswith(".dist-info") or project.replace(".", "_").replace("-", "_").lower() != wanted:
                continue
            try:
                with open(os.path.join(folder, name, "METADATA"), encoding="utf-8") as metadata:
                    for line in metadata:
                        if not line.strip():  # the end of the headers
                            break
                        if line.lower().startswith("version:"):
                            return line.split(":", 1)[1].strip()
            except OSError:
                continue
    return None


class _Version(argparse.Action):
    """``--version``, looked up only when asked."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(_version_line())  # stdout, as argparse's own
        parser.exit()


def _version_line() -> str:
    return f"{PROG} {installed_version() or 'unknown'}"


class _Parser(argparse.ArgumentParser):
    """argparse's parser, except that ``--help`` lets a closed stdout be seen (argparse's own printing
    swallows ``OSError``), so that it exits 141 like every command's output; sub-commands inherit it."""

    def print_help(self, file: Any = None) -> None:
        (file or sys.stdout).write(self.format_help())


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """Given ``command``, a parser with only that sub-command, so that running one command imports only its
    own modules (``attribute --json`` starts in about half the time). Without one, the top level: every
    command listed by name and summary (``helptext.COMMANDS``), none of their modules imported; enough for
    ``--help``, ``--version`` and argparse's message for a missing or mistyped command."""
    from mixins.helptext import HelpFormatter

    parser = _Parser(
        prog=PROG,
        description="Record and inspect SGLang CUDA-graph capture traces.",
        epilog="Run 'capture-trace COMMAND --help' for its options, examples and exit codes.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action=_Version, help="show the installed version and exit")
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
            print(_version_line())
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
