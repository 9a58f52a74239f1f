"""The analyzer's sub-commands, dispatched: each lives in its own module under ``commands/`` (arguments,
computation over the model, rendering), registered here by name. Only the module of the command being
run is imported (``mixins.cli`` asks for that one), so a command never pays for the others' imports.
The package's layout: ``mixins/analysis/__init__.py``.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from mixins.usage import ANALYSIS_COMMANDS

__all__ = ["COMMANDS", "add_commands"]

COMMANDS = ANALYSIS_COMMANDS
# command -> (module under mixins.analysis.commands, its function that registers the sub-parser)
_REGISTRARS = {
    "ls": ("ls", "add_ls"),
    "clean": ("ls", "add_clean"),
    "summary": ("summary", "add"),
    "diff": ("diff", "add"),
    "check": ("check", "add"),
    "time": ("time", "add"),
    "attribute": ("attribute", "add"),
    "report": ("report", "add"),
    "memory": ("memory", "add"),
}


def add_commands(subparsers: Any, only: str | None = None) -> None:
    """Register every analyzer command (or ``only`` that one) on argparse sub-parsers, in ``COMMANDS`` order."""
    for name in COMMANDS:
        if only is None or only == name:
            module, function = _REGISTRARS[name]
            getattr(import_module(f"mixins.analysis.commands.{module}"), function)(subparsers)
