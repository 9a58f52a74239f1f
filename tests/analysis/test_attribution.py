"""Part 2: naming captured launches by aligning with the eager pass of the same segment.

No GPU here, so the capture pass is built from the real H100 trace: its CPU side (ops, modules and
launches) is replayed later in time with fresh correlation / External ids and without kernel events,
between a ``cudaStreamBeginCapture`` and its ``cudaStreamEndCapture``, which is exactly what a
CUDA-graph capture records after an eager warm-up. The record names them through the one namer
(``windows.windows_of``), the one ``attribute`` uses.
"""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

from mixins.analysis.model.records import load_record, summarize
from tests.trace_files import call, span

H100 = Path(__file__).resolve().parent.parent / "data" / "h100_qwen1.5-0.5b_inference.json.gz"
SHIFT_IDS = 10_000_000


def _with_capture_pass(dst: Path, perturb_op: str | None = None) -> dict[str, Any]:
    doc = json.load(gzip.open(H100))
    events = doc["traceEvents"]
    cpu = [e for e in events if e.get("cat") in ("cpu_op", "cuda_runtime", "cuda_driver", "python_function")]
    end = max(e["ts"] + e.get("dur", 0) for e in events if "ts" in e and isinstance(e["ts"], float))
    start = min(e["ts"] for e in cpu)
    shift = end - start + 1000.0
    replay = []
    perturbed = None
    for e in cpu:
        e2 = copy.deepcopy(e)
        e2["ts"] += shift
        args = e2["args"]
        for key in ("correlation", "External id"):
            if key in args:
                args[key] += SHIFT_IDS
        if perturbed is None and perturb_op and e2["name"] == perturb_op and e2.get("cat") == "cpu_op":
            args["Input Dims"] = [[12345]] + args["Input Dims"][1:]
            perturbed = args["External id"]
        replay.append(e2)
    events.extend(replay)
    first, last = min(e["ts"] for e in replay), max(e["ts"] + e.get("dur", 0) for e in replay)
    for name, ts in (("cudaStreamBeginCapture", first - 0.5), ("cudaStreamEndCapture", last + 0.5)):
        events.append(call(name, ts, 0.1, pid=cpu[0]["pid"], tid=cpu[0]["tid"]))
    events.append(span("capture::bs=16", start - 1.0, 2 * shift + 10.0, pid=cpu[0]["pid"], tid=cpu[0]["tid"]))
    dst.write_bytes(gzip.compress(json.dumps(doc).encode()))
    launches_of_perturbed = sum(
        1 for e in replay if "LaunchKernel" in e["name"] and e["args"].get("External id") == perturbed
    )
    return {
        "replayed_launches": sum("LaunchKernel" in e["name"] for e in replay),
        "perturbed_launches": launches_of_perturbed,
    }


def test_captured_launches_get_names_from_the_eager_pass(tmp_path: Path) -> None:
    info = _with_capture_pass(tmp_path / "t.json.gz")
    s = summarize(load_record(str(tmp_path / "t.json.gz")), top=10_000)
    seg = next(x for x in s["segments"] if x["label"] == "bs=16")
    assert seg["launches"] == 2 * info["replayed_launches"] == 2 * 1029
    assert seg["unnamed_launches"] == info["replayed_launches"]
    assert seg["attributed_launches"] == info["replayed_launches"]
    assert seg["unknown_launches"] == 0
    attributed = [k for row in seg["top"] for k in row["kernels"] if k.get("attributed")]
    assert attributed and all(k["name"] for k in attributed)
    for row in seg["top"]:  # a recovered name is one the same signature really ran eagerly
        seen = {k["name"] for k in row["kernels"] if not k.get("attributed") and k["name"]}
        assert {k["name"] for k in row["kernels"] if k.get("attributed")} <= seen


def test_no_silent_guess_when_the_op_differs(tmp_path: Path) -> None:
    info = _with_capture_pass(tmp_path / "t.json.gz", perturb_op="aten::mm")
    assert info["perturbed_launches"] > 0
    s = summarize(load_record(str(tmp_path / "t.json.gz")))
    seg = next(x for x in s["segments"] if x["label"] == "bs=16")
    assert seg["unknown_launches"] == info["perturbed_launches"]
    assert seg["attributed_launches"] == info["replayed_launches"] - info["perturbed_launches"]
