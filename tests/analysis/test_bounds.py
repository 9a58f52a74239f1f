"""Memory bounded by the limits for every event shape; attribute's matching near-linear.

Work, not time: the matcher counts its node steps (``_Matcher.work``) and the memory test reads a child
process's own peak RSS; both bounds are generous multiples of what the code needs, and far below what
the designs they replace cost (docs/DESIGN.md §7.1, §8; ``benchmarks/bench_bounds.py`` prints both).
Inputs are GENERATED (``shapes.py``).
"""

from __future__ import annotations

import json
import random
from functools import partial
from pathlib import Path

import pytest
from analysis_child import bounded
from shapes import POOL, REPLAY_MODES, cli_args, replay_sequences, window_names, write_shape

from mixins.analysis.commands import attribute_match as attribute
from mixins.analysis.model.events import D_COPY, D_KERNEL
from mixins.analysis.model.record import Kernel
from mixins.analysis.model.windows import Node, Site, Window
from tests.trace_files import call, kernel, op, write_trace

MIB = 1 << 20
GRID, BLOCK = (4, 1, 1), (64, 1, 1)
SITE = Site("aten::mm", "NA", "[[8,8]]", '["float"]')


# -- memory: bytes kept per event, for the shape that costs each command most ------------------------------

# Measured by ``benchmarks/bench_bounds.py memory`` (docs/DESIGN.md §7.1): bytes per event of
# the costliest shape per reading path, with a cap that is a generous multiple of the figure and
# well below what per-event objects cost (kernel events held as objects: ~680 B in summary/diff/check).
# ``summary``/``diff``/``check`` share one collector, ``attribute``/``time`` another each.
CAPS = {
    ("summary", "kernel"): 250,  # measured ~70 B (was ~680 B)
    ("time", "cpu_op"): 100,  # ~60 B; 127-161 B with its columns indexed through a sort order; ~330 B as tuples
    ("time", "launch"): 250,  # ~90 B: time's costliest shape since (every launch a call in its sorts)
    ("attribute", "kernel"): 300,  # ~80 B (was ~220 B: a dict entry and a list per correlation)
}


def _peak_rss(argv: list[str]) -> int:
    """Peak RSS (bytes) of the real CLI in a child (its own VmHWM), which must succeed."""
    proc, peak = bounded(4 << 30, *argv)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return peak


@pytest.mark.slow
@pytest.mark.parametrize(("cmd", "shape"), sorted(CAPS))
def test_memory_per_event_at_the_event_limit(tmp_path: Path, cmd: str, shape: str) -> None:
    """The costliest event shapes at ``--max-events`` (scaled down to 150,000): peak RSS grows by less
    than the cap in bytes per event over the same command on a 50,000-event trace (interpreter, imports and the
    reader's full-size slices cancel out). At the default limit the figure times 10M is the bound stated."""
    n, small = 150_000, 50_000
    rss = []
    for events in (small, n):
        d = tmp_path / str(events)
        d.mkdir()
        trace = write_shape(d / "trace.json.gz", shape, events, replay_and_capture=cmd == "attribute")
        rss.append(_peak_rss([*cli_args(cmd, trace), "--max-events", str(n)]))
    per_event = (rss[1] - rss[0]) / (n - small)
    print(f"{cmd} on {shape} events: {per_event:.0f} B per event ({rss[0] / MIB:.0f} -> {rss[1] / MIB:.0f} MiB)")
    assert per_event < CAPS[cmd, shape], per_event


def _windows(names_per_window: list[list[str]]) -> list[Window]:
    kernels: dict[str, Kernel] = {}
    nodes = [[Node(D_KERNEL, kernels.setdefault(n, Kernel(n, GRID, BLOCK)), SITE, w) for n in names]
             for w, names in enumerate(names_per_window)]
    return [Window("capture.json.gz", None, "all", None, w, ns, 0, "launch") for w, ns in enumerate(nodes)]


def _replay(names: list[str]) -> list[tuple[int, Kernel]]:
    return [(D_KERNEL, Kernel(n, GRID, BLOCK)) for n in names]


def _key(replay: list[tuple[int, Kernel]]) -> tuple[int, ...]:
    return tuple(hash((kind, k.name)) for kind, k in replay)


@pytest.mark.slow
@pytest.mark.parametrize("windows, launches, replays", [
    pytest.param(1000, 300, 100, id="100-replays"),
    pytest.param(1000, 500, 300, id="300-replays", marks=pytest.mark.exhaustive),
])
def test_attribute_matching_work_is_near_linear(windows: int, launches: int, replays: int) -> None:
    """Distinct capture windows x launches, distinct replayed sequences of each mode (found in one window;
    with a kernel no window has; out of order in every window): a plain search, every sequence against
    every window node by node, takes ~150M steps per mode at 1,000 x 500 x 300 (75 s). The
    bound: a few steps per capture node plus per replayed item, all modes together, at both scales."""
    m = attribute._Matcher(_windows([window_names(w, launches) for w in range(windows)]))
    for mode in REPLAY_MODES:
        before = m.work
        sequences = replay_sequences(windows, launches, replays, mode)
        results = [m.candidates(_key(r), partial(list, r)) for r in map(_replay, sequences)]
        work = m.work - before
        size = windows * launches + replays * launches
        assert work <= 4 * size, (mode, work, size)
        assert work * 10 < replays * windows * launches // 4  # the old search did at least this
        if mode == "found":
            for r, (ok, _) in enumerate(results):
                assert [(w.order, pos) for w, pos in ok] == [((3 * r) % windows, list(range(launches)))]
        else:
            assert all(not ok for ok, _ in results)
            want = "is in no capture window" if mode == "absent" else "(the work limit)"
            assert all(want in why for _, why in results), results[0][1]
        print(f"{mode}: {work:,} node steps for {size:,} capture nodes + replayed items")


def _random_case(rng: random.Random) -> tuple[list[Window], list[list[tuple[int, Kernel]]]]:
    """Small windows over a few names, some grids left unknown, copies, duplicates and unnamed nodes."""
    names = [f"k{n}" for n in range(4)]

    def kernel() -> Kernel:
        return Kernel(rng.choice(names), rng.choice([GRID, (8, 1, 1), None]), rng.choice([BLOCK, None]))

    windows = []
    for w in range(rng.randint(1, 6)):
        nodes = [
            Node(D_COPY, None, SITE, -1) if rng.random() < 0.15 else Node(D_KERNEL, kernel(), SITE, -1)
            for _ in range(rng.randint(0, 7))
        ]
        unnamed = 0
        if nodes and rng.random() < 0.1:
            nodes[0] = Node(D_KERNEL, None, SITE, -1)
            unnamed = 1
        windows.append(Window("c", None, "all", None, w, nodes, unnamed, "launch"))
        if rng.random() < 0.3:
            windows.append(Window("c", None, "all", None, w + 100, list(nodes), unnamed, "launch"))
    replays = []
    for _ in range(8):
        src = rng.choice(windows).nodes
        seq = [(n.kind, n.kernel or Kernel("k0")) for n in src if rng.random() < 0.8]
        if seq and rng.random() < 0.5:
            i = rng.randrange(len(seq))
            seq[i] = (D_KERNEL, kernel() if rng.random() < 0.5 else Kernel(rng.choice(names), GRID, BLOCK))
        replays.append([(kind, k if k.grid or kind != D_KERNEL else Kernel(k.name, GRID, BLOCK)) for kind, k in seq])
    return windows, replays


def test_indexed_matcher_agrees_with_verify_on_every_window() -> None:
    """The indexed search finds exactly the windows (and positions) that :func:`attribute.verify` finds
    window by window; when some window verifies with no skipped node, exactly those (``pick`` narrows
    to them first); and the same reason when none does."""
    rng = random.Random(19)
    compared = 0
    for _ in range(400):
        windows, replays = _random_case(rng)
        m = attribute._Matcher(windows)
        for replay in replays:
            ok, why = m.candidates(_key(replay) + (id(replay),), partial(list, replay))
            want = [(w, res) for w in windows if not isinstance(res := attribute.verify(w, replay), str)]
            exact = [(w, pos) for w, pos in want if len(pos) == len(w.nodes)]
            assert [(w.order, pos) for w, pos in ok] == [(w.order, pos) for w, pos in (exact or want)]
            if not want:
                reasons = [r for w in windows if isinstance(r := attribute.verify(w, replay), str)]
                if "is in no capture window" in why:
                    kind, k = replay[int(why.split("#", 1)[1].split(" ", 1)[0])]
                    key = (kind, k.name if kind == D_KERNEL else None)
                    assert all(key != attribute._node_key(n) for w in windows for n in w.nodes)
                else:
                    assert why == min(set(reasons), key=lambda r: (-reasons.count(r), r))
            compared += 1
    assert compared == 400 * 8


def test_pool_makes_every_adversarial_window_distinct() -> None:
    """The adversarial capture would be easy if windows repeated (they are verified once per content)."""
    assert POOL > 1000
    assert len({tuple(window_names(w, 500)) for w in range(1000)}) == 1000


def test_launch_and_kernel_paired_by_a_flow_only(run_cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A launch and its kernel without correlation ids, paired only by an ac2g flow (older Kineto): the
    column collector resolves the flow as the per-event one did, and the op gets its kernel."""
    mm = {"External id": 5, "Input Dims": [[8, 8], [8, 8]], "Input type": ["float", "float"]}
    path = write_trace(tmp_path / "flows.json.gz", [
        op("aten::mm", 5, 20, **mm), call("cudaLaunchKernel", 10, 2, **{"External id": 5}),
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 77, "pid": 1, "tid": 1, "ts": 10},
        kernel("gemm", 30, 3, grid=[1, 1, 1], block=[32, 1, 1]),
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 77, "pid": 0, "tid": 7, "ts": 30, "bp": "e"},
        call("cudaLaunchKernel", 40, 2, correlation=3, **{"External id": 9}), kernel("orphan", 50, 3),
    ])
    rc, out, err = run_cli("summary", path, "--json")
    assert rc == 0, err
    (seg,) = json.loads(out)["traces"][0]["segments"]
    assert (seg["cpu_ops"], seg["launches"], seg["kernels"], seg["linked_kernels"]) == (1, 2, 2, 1)
    assert seg["unnamed_launches"] == 1  # the launch with correlation 3 ran no kernel in the trace
    (top,) = seg["top"]
    assert top["op"] == "aten::mm" and [k["name"] for k in top["kernels"]] == ["gemm"]
    assert top["kernels"][0]["grid"] == [1, 1, 1]

