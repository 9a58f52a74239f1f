"""Group sizes in the metadata (so ``check`` can tell a missing rank) and HTA-ready ``distributedInfo``.

Real profiles, real files; the torch.distributed case runs two real gloo ranks in subprocesses.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace as _Holder  # a runner, its model_runner, its server_args

import pytest
from core_helpers import capture_trace, export_env, export_mm, exported_trace, load_trace, run_ranks

from mixins import wait_for_exports
from mixins.metadata import distributed_info, trace_header
from mixins.naming import Ranks, Sizes, discover_sizes
from tests.interop import import_hta

_RUNNER_RANK = Ranks(1, 0, 1, "runner")
_NONE = Sizes(None, None, None, None)


@pytest.mark.parametrize(("runner", "ranks", "sizes"), [
    # sglang 0.4.10-0.5.13: CudaGraphRunner.tp_size / dp_size copied from server_args
    (_Holder(tp_size=4, dp_size=2), _RUNNER_RANK, Sizes(4, 2, None, "runner")),
    (_Holder(model_runner=_Holder(tp_size=2)), _RUNNER_RANK, Sizes(2, None, None, "runner")),  # ModelRunner <= 0.5.13
    # ModelRunner.server_args (every version)
    (_Holder(model_runner=_Holder(server_args=_Holder(tp_size=8, dp_size=1))), _RUNNER_RANK,
     Sizes(8, 1, None, "runner")),
    (None, Ranks(1, 0, 1, "explicit"), _NONE),  # an explicit rank, nothing saying how many: unknown, never guessed
    (_Holder(tp_size=2), Ranks(3, 0, 1, "runner"), _NONE),  # a size that cannot hold the rank is not recorded
    (_Holder(tp_size="2", model_runner=_Holder(tp_size=True)), Ranks(0, 0, 1, "runner"), _NONE),  # not numbers
    (None, Ranks(0, 0, 1, "default"), Sizes(1, None, None, "default")),  # nothing named a rank: rank 0 of 1
])
def test_sizes_come_from_the_runner_and_are_never_guessed(runner: object, ranks: Ranks, sizes: Sizes) -> None:
    assert discover_sizes(runner, ranks) == sizes


def test_explicit_tp_size_wins_and_is_validated(trace_env: Path) -> None:
    assert discover_sizes(_Holder(tp_size=8), Ranks(1, 0, 1, "explicit"), tp_size=2).tp_size == 2
    with pytest.raises(ValueError, match="tp_size must be an integer >= 4"):
        discover_sizes(None, Ranks(3, 0, 1, "explicit"), tp_size=2)
    path = export_mm("R", tp_rank=1, tp_size=2)
    assert path is not None and wait_for_exports(60)
    meta = load_trace(path)["capture_trace"]
    assert (meta["tp_size"], meta["pp_size"], meta["size_source"]) == (2, 1, "explicit")
    assert meta["dp_size"] is None and meta["world_size"] is None


def test_distributed_info_is_the_rank_in_the_tp_pp_world() -> None:
    meta = {"tp_rank": 1, "pp_rank": 1, "pp_size": 2, "tp_size": 4}
    assert distributed_info(meta) == {"rank": 5, "world_size": 8, "source": "sglang-capture-trace"}
    assert distributed_info({**meta, "pp_rank": 0, "pp_size": 1, "tp_size": None}) == {
        "rank": 1,
        "source": "sglang-capture-trace",
    }
    # a later pipeline stage without a TP size has no knowable world rank: nothing is invented
    assert distributed_info({**meta, "tp_size": None}) is None


def test_header_keeps_kinetos_distributed_info() -> None:
    meta = {"tp_rank": 1, "pp_rank": 0, "pp_size": 1, "tp_size": 2}
    kineto = b'\n  "schemaVersion": 1,\n  "distributedInfo": {"backend": "gloo", "rank": 1},\n  "traceEvents": ['
    assert b"distributedInfo" not in trace_header(meta, kineto)
    added = json.loads(trace_header(meta, b'"schemaVersion": 1, "traceEvents": [').decode() + '"x": 0}')
    assert added["distributedInfo"]["rank"] == 1
    # a "distributedInfo" string inside an event does not count
    late = b'"schemaVersion": 1, "traceEvents": [{"name": "distributedInfo"}'
    assert b'"distributedInfo": {' in trace_header(meta, late)


def test_hta_loads_two_ranks_without_torch_distributed(trace_env: Path) -> None:
    """Before: no distributedInfo, HTA took every file as rank 0 and kept one. (HTA is the extra
    [interop]: .ci/run runs this in its interop venv; elsewhere without it this skips, saying so.)"""
    TraceAnalysis = import_hta("hta.trace_analysis").TraceAnalysis

    for rank in (0, 1):
        exported_trace("Decode", 3, rank)
    analysis = TraceAnalysis(trace_dir=str(trace_env))
    assert sorted(analysis.t.traces) == [0, 1]
    for rank in (0, 1):
        trace = load_trace(trace_env / f"cuda_graph_capture-Decode-TP-{rank}.json.gz")
        assert trace["distributedInfo"] == {"rank": rank, "source": "sglang-capture-trace"}


def test_two_gloo_ranks_record_sizes_and_check_notices_a_missing_rank(tmp_path: Path) -> None:
    env = export_env(tmp_path / "profiles")
    paths = [Path(p) for p in run_ranks(2, "gloo_export", str(tmp_path / "store"), env=env)]
    assert [p.name for p in paths] == [f"cuda_graph_capture-GlooRunner-TP-{r}.json.gz" for r in (0, 1)]
    for rank, path in enumerate(paths):
        trace = load_trace(path)
        meta = trace["capture_trace"]
        assert (meta["tp_rank"], meta["tp_size"], meta["world_size"]) == (rank, 2, 2)
        assert meta["rank_source"] == meta["size_source"] == "torch.distributed"
        assert trace["distributedInfo"]["backend"] == "gloo"  # Kineto's own, kept as it was
        assert "source" not in trace["distributedInfo"]
    directory = paths[0].parent
    ok = capture_trace("check", str(directory))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    paths[1].unlink()
    missing = capture_trace("check", str(directory))
    assert missing.returncode == 1
    assert "GlooRunner" in missing.stdout and "TP rank 1 missing (tp_size 2)" in missing.stdout
