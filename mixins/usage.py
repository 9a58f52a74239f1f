"""What ``capture-trace`` offers and answers, as plain data: its sub-commands with their one-line
summaries, its exit codes and its version. No imports beyond the standard library's already loaded ``os``
and ``sys``: ``--version`` is answered from here alone, and ``--help`` from here and ``mixins.helptext``,
without argparse (for ``--version``) or any command's module (docs/DESIGN.md §7.6).
"""

from __future__ import annotations

import os
import sys

from _sglang_capture_trace_switches import DISTRIBUTION

__all__ = [
    "OK", "DIFFERENT", "TROUBLE", "INTERRUPTED", "BROKEN_PIPE", "EXIT_CODES", "COMMANDS", "ANALYSIS_COMMANDS",
    "PROG", "installed_version", "version_line",
]

PROG = "capture-trace"

# Every command's exit codes, as GNU diff's: trouble (2) wins over a difference (1), so a CI gate never
# passes on an unreadable rank; each command's ``--help`` says what 0 and 1 mean for it.
OK, DIFFERENT, TROUBLE = 0, 1, 2
EXIT_CODES = ("ok", "a difference or inconsistency was found", "bad input or usage (wins over 1)")
INTERRUPTED = 130  # 128 + SIGINT: Ctrl-C
# 128 + SIGPIPE, what a shell shows for a writer killed by SIGPIPE: never 0 or 1, which mean "same"/"different".
BROKEN_PIPE = 141
# Every sub-command and its one-line summary, in ``--help`` order: ``mixins.cli`` dispatches on the names
# and answers ``capture-trace --help`` from this table alone, without importing any command's module;
# each module's ``add`` registers its own sub-parser under the same summary (``helptext.add_command``).
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


def version_line() -> str:
    """What ``--version`` prints."""
    return f"{PROG} {installed_version() or 'unknown'}"
