"""One look for every ``capture-trace`` sub-command's ``--help``: description, example, exit codes,
and each option's default, wrapped to the terminal (``COLUMNS`` included, as argparse reads it); the
parser class and ``--version`` action every parser uses. What is listed comes from ``mixins.usage``."""

from __future__ import annotations

import argparse
import sys
import textwrap

from mixins.usage import BROKEN_PIPE, COMMANDS, EXIT_CODES, version_line

TYPE_CHECKING = False  # not typing's: ``capture-trace --help`` imports this module and not typing
if TYPE_CHECKING:
    from typing import Any


class VersionAction(argparse.Action):
    """``--version``, looked up only when asked."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        print(version_line())  # stdout, as argparse's own
        parser.exit()


class Parser(argparse.ArgumentParser):
    """argparse's parser, except that ``--help`` lets a closed stdout be seen (argparse's own printing
    swallows ``OSError``), so that it exits 141 like every command's output; sub-commands inherit it."""

    def print_help(self, file: Any = None) -> None:
        (file or sys.stdout).write(self.format_help())


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Wraps prose to the width, keeps multi-line text (examples) as written, adds "(default: …)"."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return "\n".join(indent + line for line in self._split_lines(text, width - len(indent)))

    def _split_lines(self, text: str, width: int) -> list[str]:
        """argparse's wrapping, but never inside a word: an option name (``--no-import``) or a path stays whole."""
        text = " ".join(text.split())
        return textwrap.wrap(text, width, break_on_hyphens=False, break_long_words=False) or [""]

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default is None or action.default is False or action.default == argparse.SUPPRESS:
            return text  # a flag's False, or an option without a default, says nothing useful
        if "%(default)" in text or "(default " in text:
            return text  # says its default already, in its own words ("10,000,000")
        return super()._get_help_string(action)


def add_command(
    subparsers: Any,
    name: str,
    description: str,
    examples: list[str],
    exit_codes: tuple[str, ...] = EXIT_CODES,
) -> argparse.ArgumentParser:
    """A sub-parser whose ``--help`` says what it does, shows how to call it and what it returns."""
    epilog = "\n".join(
        ["examples:", *(f"  {line}" for line in examples), "", "exit codes:"]
        + [f"  {code}  {meaning}" for code, meaning in enumerate(exit_codes)]
        + [f"  {BROKEN_PIPE}  the reader of the output went away (`... | head`)"]
    )
    return subparsers.add_parser(  # type: ignore[no-any-return]
        name, help=COMMANDS[name], description=description, epilog=epilog, formatter_class=HelpFormatter
    )


def int_at_least(low: int, what: str) -> Any:
    """An argparse ``type`` that refuses anything but an integer >= ``low`` (exit 2 with a one-line message)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(f"{what} must be an integer >= {low}, got {text!r}")
        return value

    return parse


def non_negative_int(what: str) -> Any:
    """``int_at_least(0, what)``: counts such as --top and --jobs (0: none, or one per core)."""
    return int_at_least(0, what)
