"""Reading back a trace the exporter wrote, for tests/core and tests/sglang alike (both import it as
``tests.trace_files``: the repository root is on the path of every pytest run, whichever venv runs it).
Standard library only, so it imports under every sglang and torch version the suites run against."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any


def load_trace(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt") as handle:
        return json.load(handle)


def range_names(trace: dict[str, Any]) -> list[str]:
    """The names of the trace's ``record_function`` ranges (``user_annotation``), in start order."""
    events = sorted((e for e in trace["traceEvents"] if e.get("cat") == "user_annotation"), key=lambda e: e["ts"])
    return [e["name"] for e in events]
