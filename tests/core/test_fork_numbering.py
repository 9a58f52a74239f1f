"""A forked child numbers its captures from 1: the parent's numbers, and its lock, are not its own."""

import subprocess
import sys

CHILD = """
import os, sys
from pathlib import Path
from mixins.naming import capture_numbers
d = Path(sys.argv[1])
print(capture_numbers.reserve(d, "t")[1], capture_numbers.reserve(d, "t")[1], flush=True)
r, w = os.pipe()
capture_numbers._lock.acquire()  # as if another parent thread were reserving a name at the fork
pid = os.fork()
if pid == 0:
    os.write(w, str(capture_numbers.reserve(d, "t")[1]).encode())
    os._exit(0)
capture_numbers._lock.release()
os.waitpid(pid, 0)
print(os.read(r, 16).decode(), capture_numbers.reserve(d, "t")[1])
"""


def test_a_forked_child_numbers_its_captures_from_one(tmp_path):
    out = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True, text=True, check=True,
                         timeout=120)  # a child stuck on the parent's lock fails instead of hanging
    assert out.stdout.split("\n")[:2] == ["1 2", "1 3"], out.stderr
