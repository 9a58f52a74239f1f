"""A forked child numbers its captures from 1: the parent's numbers are not its own (naming.capture_numbers)."""

import subprocess
import sys

CHILD = """
import os, sys
from pathlib import Path
from mixins.naming import capture_numbers
d = Path(sys.argv[1])
print(capture_numbers.reserve(d, "t")[1], capture_numbers.reserve(d, "t")[1], flush=True)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.write(w, str(capture_numbers.reserve(d, "t")[1]).encode())
    os._exit(0)
os.waitpid(pid, 0)
print(os.read(r, 16).decode(), capture_numbers.reserve(d, "t")[1])
"""


def test_a_forked_child_numbers_its_captures_from_one(tmp_path):
    out = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["1 2", "1 3"], out.stderr
