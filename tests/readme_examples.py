"""The README's ``$ capture-trace …`` examples, re-run: each command line against the lines shown after it."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
_BRACES = re.compile(r"^(\S*)\{,(\w+)\}(\S*)$")  # bash's a{,b}c: ac abc


def examples() -> list[tuple[list[str], bool, list[str]]]:
    """(argv after ``capture-trace``, whether stdout is redirected away, the lines shown) per README example."""
    found = []
    for block in (REPO / "README.md").read_text(encoding="utf-8").split("```")[1::2]:
        lines = block.splitlines()
        starts = [n for n, line in enumerate(lines) if line.startswith("$ ")] + [len(lines)]
        for start, end in itertools.pairwise(starts):
            command, _, redirect = lines[start].removeprefix("$ ").partition(" > ")
            program, *words = command.split()
            assert program == "capture-trace", lines[start]
            argv: list[str] = []
            for word in words:
                braces = _BRACES.match(word)
                argv += [braces[1] + braces[3], braces[1] + braces[2] + braces[3]] if braces else [word]
            found.append((argv, bool(redirect), lines[start + 1:end]))
    return found


def assert_shows(argv: list[str], redirected: bool, shown: list[str], cwd: Path) -> None:
    """Run ``capture-trace ARGV`` in ``cwd`` with piped output: stdout is the shown lines less stderr's, and
    stderr's lines are shown in their order (a terminal interleaves the two; pipes keep each in order)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "mixins", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == (2 if any(" error: " in line for line in shown) else 0), (argv, done.stderr)
    err = done.stderr.splitlines()
    assert [line for line in shown if line in err] == err, (argv, done.stderr)
    if not redirected:
        assert [line for line in shown if line not in err] == done.stdout.splitlines(), argv
