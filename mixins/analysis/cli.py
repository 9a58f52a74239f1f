"""The analyzer's sub-commands, dispatched: each lives in its own module under ``commands/`` (arguments,
computation over the model, rendering), registered here by name. Only the module of the command being
run is imported (``mixins.cli`` asks for that one), so a command never pays for the others' imports.
The package's layout: ``mixins/analysis/__init__.py``.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from mixins.usage import ANALYSIS_COMMANDS

__all__ = ["add_commands"]


def add_commands(subparsers: Any, only: str | None = None) -> None:
    """Register every analyzer command (or ``only`` that one) on argparse sub-parsers, in ``ANALYSIS_COMMANDS`` order:
    ``commands/NAME.py``'s ``add`` (``clean`` lives with ``ls``: ``ls.add_clean``)."""
    for name in ANALYSIS_COMMANDS:
        if only is None or only == name:
            module = import_module(f"mixins.analysis.commands.{'ls' if name == 'clean' else name}")
            (module.add_clean if name == "clean" else module.add)(subparsers)
