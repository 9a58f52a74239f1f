"""Every analyzer command prints the same JSON (exit code and error lines too) on every real trace in
tests/data, its demo captures and the derived NVIDIA-style pair as recorded in ``golden.json`` before the
model was made columnar (``golden.py`` says how to record it again, and what each key runs)."""

from __future__ import annotations

import json

import pytest

from tests.analysis.golden import GOLDEN, record_repo


@pytest.fixture(scope="module")
def now() -> dict:
    return record_repo()


def test_the_same_command_lines_are_recorded(now: dict) -> None:
    assert sorted(now) == sorted(json.loads(GOLDEN.read_text()))


@pytest.mark.parametrize("key", sorted(json.loads(GOLDEN.read_text())))
def test_each_command_prints_what_it_printed_before(now: dict, key: str) -> None:
    before = json.loads(GOLDEN.read_text())[key]
    assert now[key] == before, key
