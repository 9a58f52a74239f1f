"""Benchmark: what planted staging names cost an export.

Another local user can create any number of directories named like our staging directories
(``.capture-trace-tmp.<pid>.<pidns>.<rand>.<host>``: this host, this pid namespace, a dead pid, owned
by them) in a shared sticky output directory. Each case runs in a fresh child process, for this tree
and, with ``--anchor``, for another checkout (e.g. ``git archive <old commit> | tar -x -C /tmp/anchor``):
the median seconds an export blocks its caller and until the file is final (and that of the first
export, which sweeps the directory), with none planted (the floor) and with ``--fakes`` planted,
side by side with the ratios planted / floor. Run as root to make the planted directories another
user's (uid 65534), as in the attack.

    python benchmarks/bench_sweep.py [--fakes 20000] [--repeat 5] [--anchor /tmp/anchor]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# One child: plant, then export `repeat` times; prints {"blocking": [...], "total": [...]}.
CHILD = r"""
import json, os, sys, time, torch
from pathlib import Path
import mixins
assert os.path.dirname(os.path.dirname(mixins.__file__)) == os.getcwd(), mixins.__file__
out_root, repeat = sys.argv[1], int(sys.argv[2])
os.environ.update(SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE="1", SGLANG_TORCH_PROFILER_DIR=out_root)
from mixins import export_cuda_graph_capture_trace, wait_for_exports
blocking, total = [], []
for i in range(repeat):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(2000):
            torch.mm(torch.ones(4, 8), torch.ones(8, 3))
    start = time.perf_counter()
    path = export_cuda_graph_capture_trace(prof, runner_name="Bench", tp_rank=i)
    blocking.append(time.perf_counter() - start)
    assert path is not None, "the export failed"
    assert wait_for_exports(600)
    total.append(time.perf_counter() - start)
    assert path.exists(), path
print(json.dumps({"blocking": blocking, "total": total}))
"""


def _dead_pid() -> int:
    """A pid no process has now (the planted names' owner, 'gone')."""
    for pid in range(4_000_000, 3_000_000, -1):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except OSError:
            continue
    raise RuntimeError("no free pid found")


def plant(directory: Path, count: int) -> None:
    directory.mkdir(parents=True, mode=0o1777)
    os.chmod(directory, 0o1777)
    host = re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname())[:64] or "_"
    namespace = os.stat("/proc/self/ns/pid").st_ino
    pid = _dead_pid()
    root = os.geteuid() == 0
    for i in range(count):
        name = directory / f".capture-trace-tmp.{pid}.{namespace}.{i:08x}.{host}"
        os.mkdir(name, 0o700)
        if root:
            os.chown(name, 65534, 65534)


def run(tree: Path, fakes: int, repeat: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        if fakes:
            plant(Path(tmp) / "graph_capture_profile", fakes)
        env = dict(os.environ, PYTHONPATH=str(tree))
        # cwd=tree: `python -c` puts the working directory first on sys.path, before PYTHONPATH
        done = subprocess.run([sys.executable, "-c", CHILD, tmp, str(repeat)], env=env, cwd=tree,
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{tree}: {done.stderr.strip()[-2000:]}")
        times = json.loads(done.stdout.splitlines()[-1])
    medians = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    return medians | {"first": times["total"][0]}  # the first export of a process sweeps the directory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fakes", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--anchor", type=Path, help="another checkout to run beside this one")
    args = parser.parse_args()
    trees = [("ours", ROOT)] + ([("anchor", args.anchor.resolve())] if args.anchor else [])
    print(f"{args.fakes:,} planted staging names, median of {args.repeat} exports, "
          f"{'owned by uid 65534' if os.geteuid() == 0 else 'owned by us (not root)'}")
    header = (f"{'tree':>6} | {'floor blocking s':>16} | {'planted blocking s':>18} | {'ratio':>6} | "
              f"{'floor 1st total s':>17} | {'planted 1st total s':>19} | {'ratio':>6} | "
              f"{'floor total s':>13} | {'planted total s':>15} | {'ratio':>6}")
    print(header)
    print("-" * len(header))
    for label, tree in trees:
        floor, planted = run(tree, 0, args.repeat), run(tree, args.fakes, args.repeat)
        print(f"{label:>6} | {floor['blocking']:>16.3f} | {planted['blocking']:>18.3f} | "
              f"{planted['blocking'] / floor['blocking']:>5.1f}x | {floor['first']:>17.3f} | "
              f"{planted['first']:>19.3f} | {planted['first'] / floor['first']:>5.1f}x | {floor['total']:>13.3f} | "
              f"{planted['total']:>15.3f} | {planted['total'] / floor['total']:>5.1f}x")


if __name__ == "__main__":
    main()
