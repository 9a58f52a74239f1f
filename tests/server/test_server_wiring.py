"""What the README says about the end-to-end server test, checked in the default run (no server started):
CI runs the ``server`` marker, the default command leaves it out, and every stand-in says what it is."""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


def test_the_default_command_leaves_the_server_test_out_and_ci_runs_it() -> None:
    # What the README's command collects from tests/server/test_server.py: nothing, every test deselected.
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "tests/server/test_server.py"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 5 and re.search(r"no tests collected \(\d+ deselected\)", proc.stdout), proc.stdout
    # CI's steps are .ci/Makefile's targets (.ci/run runs them): the `server` step runs the marker
    makefile = (REPO / ".ci" / "Makefile").read_text()
    recipe = re.search(r"^server:.*\n\t(.*)$", makefile, re.M)
    assert recipe, "no server step in .ci/Makefile"
    assert shlex.split(recipe[1]) == [
        "$(STEP)", "$@", ".venv/bin/python", "-m", "pytest", "-m", "server", "tests/server", "$(QUIET)"
    ], recipe[1]
    everything = re.search(r"^all:((?:.*\\\n)*.*)$", makefile, re.M)
    assert everything and "server" in everything[1].split()


def test_every_stand_in_says_it_is_one() -> None:
    files = sorted((HERE / "standins").rglob("*.py"))
    assert {f.relative_to(HERE / "standins").as_posix() for f in files} == {
        "sitecustomize.py", "sgl_kernel/__init__.py", "sgl_kernel/scalar_type.py"
    }
    for path in files:
        docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
        assert docstring.startswith("TEST STAND-IN"), path
