"""HolisticTraceAnalysis (the ``[interop]`` extra) for the tests that load our traces in it. Where it is
not installed they skip and say how to get it; under ``CAPTURE_TRACE_INTEROP=1`` (``.ci/run``'s interop
job, in the venv of ``.ci/interop_venv.sh``) its absence fails instead, so CI cannot pass by skipping.
Imported as ``tests.interop`` (the repository root is on the path)."""

from __future__ import annotations

import importlib
import os
from typing import Any

import pytest

REQUIRED = "CAPTURE_TRACE_INTEROP"


def import_hta(module: str) -> Any:
    if os.environ.get(REQUIRED):
        return importlib.import_module(module)
    return pytest.importorskip(
        module, reason="HolisticTraceAnalysis is not installed: pip install -e '.[interop]' (.ci/run runs this "
        "test in its interop venv)"
    )
