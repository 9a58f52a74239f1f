"""Benchmark: ``capture-trace attribute`` against ``json.load`` + a straightforward walk, same pairs.

Why this shape: the promise is relative (>= 10x faster than loading both traces with ``json.load``
and walking the dicts, <= 1/3 of its peak RSS), so both are measured in one run, on the real ROCm
vLLM pair of tests/data and on a DERIVED scaled pair built from it (the capture repeated in
``--segments`` ``capture::bs=N`` segments, the replay's graph launch repeated ``--launches`` times).
Each measurement runs in its own process; peak RSS is that process's own maximum plus its largest
worker's. ``attribute`` runs as users run it (the CLI, ``--json``), once as is and once with ``-j 1``
(no worker: the replay is read after the captures). Two floor rows show what inflating and decoding
alone cost, so the ratio any msgspec-based reader could reach on this machine is printed beside ours.

    python benchmarks/bench_attribute.py [--segments 4] [--launches 1000] [--cache DIR] [--repeat 1]

The walk does what ``attribute`` does, the plain way: windows between Begin/EndCapture, innermost
``cpu_op`` / ``nn.Module`` per launch by a per-thread stack sweep, graph kernels by correlation matched
to a window by kernel names in order (batch-size hint from the iteration annotation), eager kernels
through their own launch; both sides print how many graph kernels they attributed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

OURS = """
    import contextlib, io, resource, sys, time
    t = time.perf_counter()
    from mixins.cli import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["attribute", "--json", *sys.argv[3:], sys.argv[2], sys.argv[1]])
    seconds = time.perf_counter() - t
    assert rc == 0, rc
    cov = json.loads(out.getvalue())["coverage"]
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({"seconds": seconds, "attributed": cov["graph_kernels_attributed"],
                      "graph_kernels": cov["graph_kernels"], "children_rss_mib": kids.ru_maxrss / 1024}))
"""

# Floors: what any reader built on msgspec pays before doing anything, in one process. "decode":
# inflate both files whole and decode every event into the reader's own structs (the fields
# attribution reads); "scan": inflate and let msgspec only find each event's bounds (``Raw``: no
# field decoded, no string or number built). Neither cuts slices, keeps columns or matches anything.
FLOOR = """
    import sys, time
    t = time.perf_counter()
    import msgspec
    from mixins.analysis.read.reader import SlimEvent
    try:
        from isal.isal_zlib import decompress
    except ImportError:
        from zlib import decompress
    element = msgspec.Raw if sys.argv[3] == "scan" else SlimEvent
    doc = msgspec.json.Decoder(msgspec.defstruct("Doc", [("traceEvents", list[element])]))
    for path in sys.argv[1:3]:
        with open(path, "rb") as f:
            events = doc.decode(decompress(f.read(), 31)).traceEvents
        del events
    print(json.dumps({"seconds": time.perf_counter() - t, "attributed": 0, "graph_kernels": 0}))
"""

WALK = r'''
    import gzip, re, sys, time
    from collections import defaultdict
    t = time.perf_counter()
    cap = json.load(gzip.open(sys.argv[1]))["traceEvents"]
    rep = json.load(gzip.open(sys.argv[2]))["traceEvents"]

    def innermost(events, points):
        """points: (ts, tid, key) -> {key: (op, module)} by a stack sweep per thread."""
        spans = defaultdict(list)
        for e in events:
            if e.get("ph") == "X" and (e.get("cat") == "cpu_op" or (e.get("cat") == "python_function"
                                       and e["name"].startswith("nn.Module: "))):
                spans[e["tid"]].append(e)
        out = {}
        by_tid = defaultdict(list)
        for p in points:
            by_tid[p[1]].append(p)
        for tid, ps in by_tid.items():
            order = sorted(spans[tid], key=lambda e: (e["ts"], -e["dur"]))
            stack, k = [], 0
            for ts, _, key in sorted(ps, key=lambda p: p[0]):
                while k < len(order) and order[k]["ts"] <= ts:
                    stack.append(order[k]); k += 1
                while stack and stack[-1]["ts"] + stack[-1]["dur"] < ts:
                    stack.pop()
                op = next((e for e in reversed(stack) if e["cat"] == "cpu_op"), None)
                mod = next((e for e in reversed(stack) if e["cat"] == "python_function"), None)
                out[key] = (op["name"] if op else None, json.dumps(op["args"].get("Input Dims")) if op else None,
                            re.sub(r"_\d+$", "", mod["name"]) if mod else "NA")
        return out

    segs = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in cap if e.get("cat") == "user_annotation"
                  and (e["name"].startswith("capture::") or e["name"].startswith("capture_")))
    rt = [e for e in cap if e.get("cat") == "cuda_runtime"]
    begins = sorted(e["ts"] for e in rt if "BeginCapture" in e["name"])
    ends = sorted(e["ts"] for e in rt if "EndCapture" in e["name"])
    launches = sorted((e for e in rt if "LaunchKernel" in e["name"]), key=lambda e: e["ts"])
    sites = innermost(cap, [(e["ts"], e["tid"], id(e)) for e in launches])
    windows = []
    for b, en in zip(begins, ends):
        nodes = [(e["args"].get("kernel"), sites[id(e)]) for e in launches if b <= e["ts"] <= en]
        seg = next((s[2] for s in segs if s[0] <= b <= s[1]), "all")
        m = re.search(r"(\d+)", seg)
        windows.append((int(m.group(1)) if m else None, seg, nodes))

    graph = {e["args"]["correlation"]: e for e in rep if "GraphLaunch" in e.get("name", "")}
    ranges = [e for e in rep if e.get("cat") == "user_annotation"]
    work = defaultdict(list)
    for e in rep:
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            work[e["args"].get("correlation")].append(e)
    rows = defaultdict(float)
    attributed = total = 0
    for corr, g in graph.items():
        ks = sorted(work[corr], key=lambda e: e["ts"])
        total += len(ks)
        hint = next((int(m.group(1)) for r in ranges if r["ts"] <= g["ts"] <= r["ts"] + r["dur"]
                     for m in [re.match(r"execute_(\d+)_", r["name"])] if m), None)
        for bs, seg, nodes in sorted(windows, key=lambda w: w[0] != hint):
            j, mapping = 0, []
            for k in ks:
                while j < len(nodes) and nodes[j][0] != k["name"]:
                    j += 1
                if j == len(nodes):
                    break
                mapping.append(nodes[j][1]); j += 1
            if len(mapping) == len(ks):
                for k, site in zip(ks, mapping):
                    rows[("graph", seg) + site] += k["dur"]
                attributed += len(ks)
                break
    eager_rt = {e["args"]["correlation"]: e for e in rep if e.get("cat") == "cuda_runtime"
                and "correlation" in e.get("args", {}) and e["args"]["correlation"] not in graph}
    calls = [e for c, e in eager_rt.items() if c in work]
    esites = innermost(rep, [(e["ts"], e["tid"], e["args"]["correlation"]) for e in calls])
    for c, site in esites.items():
        for k in work[c]:
            rows[("eager", None) + site] += k["dur"]
    json.dumps([[list(k), v] for k, v in rows.items()])
    print(json.dumps({"seconds": time.perf_counter() - t, "attributed": attributed, "graph_kernels": total}))
'''


BUILD = """
    import sys
    from pathlib import Path
    from pairs import VLLM_CAPTURE, VLLM_REPLAY, load, save, scaled
    d, segments, launches = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    cap, rep = scaled(load(VLLM_CAPTURE), load(VLLM_REPLAY), segments, launches)
    save(cap, d / ".capture.tmp.json.gz").replace(d / "capture.json.gz")
    save(rep, d / ".replay.tmp.json.gz").replace(d / "replay_rank0.json.gz")
"""


def build_scaled(cache: Path, segments: int, launches: int) -> tuple[Path, Path]:
    """The DERIVED scaled pair, built once in a child process (so this process stays small) and cached."""
    d = cache / f"scaled-{segments}x{launches}"
    cap_p, rep_p = d / "capture.json.gz", d / "replay_rank0.json.gz"
    if cap_p.exists() and rep_p.exists():
        return cap_p, rep_p
    d.mkdir(parents=True, exist_ok=True)
    print(f"building the scaled pair ({segments} segments, {launches} graph launches; cached in {d}) ...")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "tests" / "analysis"))
    code = textwrap.dedent(BUILD)
    subprocess.run([sys.executable, "-c", code, str(d), str(segments), str(launches)], check=True, env=env)
    return cap_p, rep_p


def measure(code: str, capture: Path, replay: Path, *argv: str) -> dict[str, Any]:
    """Run one measurement in a fresh process; add its peak RSS (MiB) and CPU seconds.

    Peak RSS is the process's own plus the largest of its worker processes' (``attribute`` reads the
    captures in workers while it reads a big replay): an upper bound on what it held at once. Linux
    keeps ru_maxrss across execve, so this (parent) process must stay small: it never loads a trace.
    """
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    src = "import json\n" + textwrap.dedent(code)
    with tempfile.TemporaryFile() as err_file:
        proc = subprocess.Popen(
            [sys.executable, "-c", src, str(capture), str(replay), *argv],
            stdout=subprocess.PIPE,
            stderr=err_file,
            env=env,
            cwd=ROOT,  # `-c` puts the working directory first on sys.path: measure this tree's mixins
        )
        assert proc.stdout is not None
        out = proc.stdout.read()
        proc.stdout.close()
        _, status, usage = os.wait4(proc.pid, 0)
        rc = os.waitstatus_to_exitcode(status)
        err_file.seek(0)
        err = err_file.read()
    if rc != 0:
        raise RuntimeError(f"measurement failed ({rc}):\n{err.decode(errors='replace')[-2000:]}")
    res: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    # wait4's ru_maxrss is the largest of the process and its waited-for workers; add the workers'
    # largest (reported by the process itself) when there were any, so two live processes count twice.
    res["rss_mib"] = usage.ru_maxrss / 1024 + float(res.get("children_rss_mib", 0.0))
    res["cpu_s"] = usage.ru_utime + usage.ru_stime  # the process's and its workers' CPU time
    return res


def best_of(code: str, capture: Path, replay: Path, repeat: int, *argv: str) -> dict[str, Any]:
    runs = [measure(code, capture, replay, *argv) for _ in range(max(1, repeat))]
    return min(runs, key=lambda r: float(r["seconds"]))


def main() -> int:
    data = ROOT / "tests" / "data"
    real = (
        data / "vllm_decode_full_graph_capture_rank_0.json.gz",
        data / "vllm_decode_full_graph_replay_rank_0.json.gz",
    )
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--segments", type=int, default=4)
    ap.add_argument("--launches", type=int, default=1000)
    ap.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "capture-trace-bench"))
    ap.add_argument("--repeat", type=int, default=1, help="runs per row; the fastest (wall) is kept")
    args = ap.parse_args()
    pairs = [("real vLLM pair", *real)]
    scaled = build_scaled(Path(args.cache), args.segments, args.launches)
    pairs.append((f"scaled x{args.segments} seg, {args.launches} launches", *scaled))
    print(f"{'pair':<34} {'what':<34} {'wall s':>7} {'CPU s':>7} {'peak RSS MiB':>13} {'graph kernels':>15}")
    for label, cap, rep in pairs:
        walk = best_of(WALK, cap, rep, args.repeat)
        rows = [
            ("json.load + walk", walk),
            ("capture-trace attribute", best_of(OURS, cap, rep, args.repeat)),
            ("  ... with -j 1", best_of(OURS, cap, rep, args.repeat, "-j", "1")),
            ("floor: inflate + decode", best_of(FLOOR, cap, rep, args.repeat, "decode")),
            ("floor: inflate + scan", best_of(FLOOR, cap, rep, args.repeat, "scan")),
        ]
        for what, r in rows:
            shown = f"{r['attributed']:,}/{r['graph_kernels']:,}" if r["graph_kernels"] else "-"
            print(f"{label:<34} {what:<34} {r['seconds']:>7.2f} {r['cpu_s']:>7.2f} {r['rss_mib']:>13.0f} {shown:>15}")
        for what, r in rows[1:]:
            w_ratio = float(walk["seconds"]) / float(r["seconds"])
            c_ratio = float(walk["cpu_s"]) / float(r["cpu_s"])
            m_ratio = float(r["rss_mib"]) / float(walk["rss_mib"])
            ratio = "walk / " + what.strip(" .")
            print(f"{'':<34} {ratio:<34} {w_ratio:>6.1f}x {c_ratio:>6.1f}x {m_ratio:>12.2f}x")
        print(f"{'':<34} (goal: >= 10x faster, RSS <= 0.33x; the floor rows bound any msgspec-based reader)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
