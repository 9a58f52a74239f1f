"""One look for every ``capture-trace`` sub-command's ``--help``: description, example, exit codes,
and each option's default, wrapped to the terminal (``COLUMNS`` included, as argparse reads it)."""

from __future__ import annotations

import argparse
import textwrap

TYPE_CHECKING = False  # not typing's: ``capture-trace --help`` imports this module and not typing
if TYPE_CHECKING:
    from typing import Any

# Every command's exit codes, as GNU diff's: trouble (2) wins over a difference (1), so a CI gate never
# passes on an unreadable rank; each command's ``--help`` says what 0 and 1 mean for it.
OK, DIFFERENT, TROUBLE = 0, 1, 2
EXIT_CODES = ("ok", "a difference or inconsistency was found", "bad input or usage (wins over 1)")
INTERRUPTED = 130  # 128 + SIGINT: Ctrl-C
# 128 + SIGPIPE, what a shell shows for a writer killed by SIGPIPE: never 0 or 1, which mean "same"/"different".
BROKEN_PIPE = 141
# Every sub-command and its one-line summary, in ``--help`` order: ``mixins.cli`` dispatches on the names
# and answers ``capture-trace --help`` from this table alone, without importing any command's module;
# each module's ``add`` registers its own sub-parser under the same summary (:func:`add_command`).
COMMANDS = {
    "demo": "capture four demo runners and write their traces",
    "doctor": "why a trace does or does not appear here: versions, switch, activation routes, patch rows",
    "ls": "one row per trace in a directory: identity, size, events, segments",
    "clean": "remove the staging directories of exports whose process is gone",
    "summary": "per trace and segment: ops, signatures, launches, kernels",
    "diff": "compare two traces' op-signature sequences per segment",
    "check": "verify every TP rank of each runner is present and captured the same sequences",
    "time": "where capture time goes: warmup / capture / instantiate / other",
    "attribute": "put each replayed CUDA-graph kernel on the capture op, module and shapes that launched it",
    "report": "one self-contained HTML page: start-up time, rank check, replay attribution",
    "memory": "CUDA memory per runner and shape, from the snapshots beside the traces",
}
# The analyzer's (``mixins.analysis.cli`` registers them).
ANALYSIS_COMMANDS = tuple(name for name in COMMANDS if name not in ("demo", "doctor"))


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
