"""A fixture's product built once per pytest run and shared by every xdist worker (a session fixture
alone runs once per worker): the first worker builds under an exclusive lock, the others wait on that
lock and read what it recorded. Imported as ``tests.built_once`` (the repository root is on the path)."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Callable
from typing import Any

import pytest


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str,
               build: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    """``build(directory)`` run by one worker of this run; every worker gets the JSON it returned."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the run's directory, above each worker's own
    target = base / name
    with open(base / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "done.json").exists():
            target.mkdir(parents=True, exist_ok=True)
            (target / "done.json").write_text(json.dumps(build(target)))
        result: dict[str, Any] = json.loads((target / "done.json").read_text())
        return result
