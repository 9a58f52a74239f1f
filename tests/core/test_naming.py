from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest
from core_helpers import run_case, run_ranks

from mixins.naming import Ranks, _CaptureNumbers, discover_ranks, trace_stem, validate_runner_name


def test_file_stem_without_and_with_pipeline_parallelism() -> None:
    assert trace_stem("R", Ranks(3, 0, 1, "explicit")) == "cuda_graph_capture-R-TP-3"
    assert trace_stem("R", Ranks(3, 1, 2, "explicit")) == "cuda_graph_capture-R-TP-3-PP-1"
    assert trace_stem("R", Ranks(0, 0, 4, "explicit")) == "cuda_graph_capture-R-TP-0-PP-0"


def test_a_data_parallel_replica_is_in_the_name_and_parsed_back() -> None:
    """Before: two replicas' TP 0 both wrote ``…-TP-0.json.gz`` (the last one replaced the other)."""
    from mixins.analysis.model.identity import identity_from_name
    from mixins.formats import MEMORY_NAME, TRACE_NAME

    assert trace_stem("R", Ranks(3, 0, 1, "explicit", dp_rank=1)) == "cuda_graph_capture-R-TP-3-DP-1"
    assert trace_stem("R", Ranks(3, 1, 2, "explicit", dp_rank=0)) == "cuda_graph_capture-R-TP-3-PP-1-DP-0"
    for name, (tp, pp, dp, n) in {
        "cuda_graph_capture-R-TP-3-DP-1.json.gz": (3, 0, 1, 1),
        "cuda_graph_capture-R-TP-3-PP-1-DP-0-2.json.gz": (3, 1, 0, 2),
        "cuda_graph_capture-R-TP-3.json.gz": (3, 0, None, 1),
    }.items():
        ident = identity_from_name(name)
        assert ident is not None and (ident.runner, ident.tp_rank, ident.pp_rank, ident.dp_rank) == ("R", tp, pp, dp)
        assert ident.capture_index == n and TRACE_NAME.match(name)
    memory = MEMORY_NAME.match("cuda_graph_memory-R-TP-3-DP-1.pickle")
    assert memory is not None and memory["dp"] == "1"  # one format for both files


def test_the_replica_is_read_where_each_release_keeps_it() -> None:
    """0.5.13 ``model_runner.dp_rank``, 0.5.20 ``model_runner.ps.dp_rank`` (sizes likewise); 1 replica, an
    unknown rank or DP attention (attention groups of one TP group, not replicas) keep the plain name."""
    args = _Holder(dp_size=2, enable_dp_attention=False)
    assert discover_ranks(_Holder(model_runner=_Holder(dp_rank=1, server_args=args))).dp_rank == 1
    ps = _Holder(dp_rank=1, dp_size=2, attn_dp_size=1, tp_rank=0)
    assert discover_ranks(_Holder(model_runner=_Holder(ps=ps))).dp_rank == 1
    ps_attention = _Holder(dp_rank=1, dp_size=2, attn_dp_size=2)
    assert discover_ranks(_Holder(model_runner=_Holder(ps=ps_attention))).dp_rank is None
    attention = _Holder(dp_size=2, enable_dp_attention=True)
    assert discover_ranks(_Holder(model_runner=_Holder(dp_rank=1, server_args=attention))).dp_rank is None
    assert discover_ranks(_Holder(model_runner=_Holder(dp_rank=0, server_args=_Holder(dp_size=1)))).dp_rank is None
    assert discover_ranks(_Holder(model_runner=_Holder(server_args=args))).dp_rank is None  # rank unknown
    assert discover_ranks(_Holder(model_runner=_Holder(dp_rank=2, server_args=args))).dp_rank is None  # outside


@pytest.mark.parametrize("bad", ["", "../x", "a/b", ".hidden", "-flag", "sp ace", "new\nline", None, 3, "a\\b"])
def test_unsafe_runner_names_are_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match="runner_name must be"):
        validate_runner_name(bad)


def test_safe_runner_names_pass() -> None:
    for good in ("DecodeCudaGraphRunner", "DraftX", "my.runner-v2", "A+B", "_private"):
        assert validate_runner_name(good) == good


def test_a_forked_child_numbers_its_captures_from_one(tmp_path: Path) -> None:
    """The parent's numbers, and its lock (held by a parent thread at the fork), are not the child's."""
    done = run_case("fork_numbering", str(tmp_path), timeout=120)  # a child stuck on the lock fails, not hangs
    assert done.stdout.splitlines() == ["1 2", "1 3"]


def test_numbering_is_per_directory_and_name(tmp_path: Path) -> None:
    numbers = _CaptureNumbers()
    first, i1 = numbers.reserve(tmp_path, "cuda_graph_capture-A-TP-0")
    second, i2 = numbers.reserve(tmp_path, "cuda_graph_capture-A-TP-0")
    third, i3 = numbers.reserve(tmp_path, "cuda_graph_capture-A-TP-0")
    other, j1 = numbers.reserve(tmp_path, "cuda_graph_capture-B-TP-0")
    elsewhere, k1 = numbers.reserve(tmp_path / "sub", "cuda_graph_capture-A-TP-0")
    assert [p.name for p in (first, second, third)] == [
        "cuda_graph_capture-A-TP-0.json.gz",
        "cuda_graph_capture-A-TP-0-2.json.gz",
        "cuda_graph_capture-A-TP-0-3.json.gz",
    ]
    assert (i1, i2, i3, j1, k1) == (1, 2, 3, 1, 1)
    assert other.name == "cuda_graph_capture-B-TP-0.json.gz" and elsewhere.parent == tmp_path / "sub"


class _Holder(types.SimpleNamespace):
    """Any attributes, as a runner or its model_runner has them."""


def test_runner_attributes_then_model_runner_then_default() -> None:
    assert discover_ranks(None) == Ranks(0, 0, 1, "default")
    runner = _Holder(model_runner=_Holder(tp_rank=5, pp_rank=1, pp_size=2))
    assert discover_ranks(runner) == Ranks(5, 1, 2, "runner")
    runner.tp_rank = 7
    assert discover_ranks(runner).tp_rank == 7
    # non-integers and bools are not ranks
    assert discover_ranks(_Holder(tp_rank="3", model_runner=_Holder(tp_rank=True))) == Ranks(0, 0, 1, "default")


def test_explicit_beats_everything_and_is_validated() -> None:
    runner = _Holder(tp_rank=5, pp_rank=1, pp_size=2)
    assert discover_ranks(runner, tp_rank=2, pp_rank=0, pp_size=1) == Ranks(2, 0, 1, "explicit")
    with pytest.raises(ValueError, match="tp_rank must be an integer >= 0"):
        discover_ranks(runner, tp_rank=-1)
    with pytest.raises(ValueError, match="pp_size must be an integer >= 1"):
        discover_ranks(runner, pp_size=0)


@pytest.fixture
def fake_sglang_parallel_state(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """FAKE sglang parallel state (sglang is not installed in this venv; tests/sglang use the real one)."""
    state = types.SimpleNamespace(tp=None)

    class _Parallel:
        @property
        def tp_rank(self) -> int:
            if state.tp is None:
                raise RuntimeError("parallel name 'tp_rank' has not been written in this process")
            return state.tp

    module = types.ModuleType("sglang.srt.runtime_context")
    module.get_parallel = lambda: _Parallel()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sglang.srt.runtime_context", module)

    legacy = types.ModuleType("sglang.srt.distributed.parallel_state")

    def not_initialised() -> int:
        raise AssertionError("tensor model parallel group is not initialized")

    legacy.get_tensor_model_parallel_rank = not_initialised  # type: ignore[attr-defined]
    legacy.get_pipeline_model_parallel_rank = lambda: 1  # type: ignore[attr-defined]
    legacy.get_pipeline_model_parallel_world_size = lambda: 2  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sglang.srt.distributed.parallel_state", legacy)
    return state


def test_sglang_state_beats_runner_attributes_once_initialised(fake_sglang_parallel_state: Any) -> None:
    runner = _Holder(tp_rank=5, pp_rank=0, pp_size=1)
    # not written yet: RuntimeError / AssertionError are survived, runner attributes used for tp
    ranks = discover_ranks(runner)
    assert ranks.tp_rank == 5 and ranks.source == "runner"
    assert (ranks.pp_rank, ranks.pp_size) == (1, 2)  # from the legacy pipeline getters
    fake_sglang_parallel_state.tp = 3
    assert discover_ranks(runner).tp_rank == 3
    assert discover_ranks(runner).source == "sglang"
    assert discover_ranks(runner, tp_rank=1).tp_rank == 1


def test_torch_distributed_rank_is_used_last(tmp_path: Path) -> None:
    """Two real gloo ranks in subprocesses: rank 1 discovers tp_rank 1 without any other source."""
    ranks = run_ranks(2, "gloo_discovered_rank", f"{tmp_path}/store")
    assert ranks == [[0, "torch.distributed"], [1, "torch.distributed"]]
