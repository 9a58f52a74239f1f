"""Profile mode of the decorator and the mixin: for runners that profile nothing themselves, our own
real CPU ``torch.profiler.profile`` runs around the named method and is exported after it returns.
The same exactly-once rules as the hook mode: subclasses, ``super()`` chains, decorated twice."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from core_helpers import export_env, exported, python_calls, range_names, run_case, trace_name

from mixins import CaptureTraceMixin, with_capture_trace
from mixins.capture_trace import capture_profiler, shape_label


class PlainRunner:
    """A user runner with no profiler of its own: capture() loops a per-shape method."""

    capture_bs = [8, 4]
    captures = 0

    def capture(self) -> str:
        type(self).captures += 1
        for bs in self.capture_bs:
            self.capture_one_batch_size(bs)
        return f"captured:{type(self).__name__}"

    def capture_one_batch_size(self, bs: int, variant: str = "plain") -> Any:
        import torch

        return torch.mm(torch.ones(bs, 8), torch.ones(8, 3))


class TokenRunner:
    capture_num_tokens = [512, 256]

    def capture(self) -> None:
        for n in self.capture_num_tokens:
            self.capture_one_shape(n)
        self.capture_one_shape(256, prefix_num_chunks=2)

    def capture_one_shape(self, size: int, *, prefix_num_chunks: int = 0) -> Any:
        import torch

        return torch.ones(size, 4).sum()


def _hierarchy(apply: str) -> tuple[type, ...]:
    if apply == "decorator":
        @with_capture_trace(profile="capture")
        class Base(PlainRunner):
            pass
    else:
        class Base(CaptureTraceMixin, PlainRunner):  # type: ignore[no-redef]
            capture_trace_profile = "capture"

    class Inheriting(Base):
        capture_bs = [2]

    class OverridingWithSuper(Base):
        def capture(self) -> str:
            return "override+" + super().capture()

    class OverridingWithoutSuper(Base):
        def capture(self) -> str:
            self.capture_one_batch_size(1)
            return "override-only"

    return Base, Inheriting, OverridingWithSuper, OverridingWithoutSuper


@pytest.mark.parametrize("apply", ["decorator", "mixin"])
def test_profile_mode_exports_one_file_per_runner_class(trace_env: Path, apply: str) -> None:
    classes = _hierarchy(apply)
    results = [cls().capture() for cls in classes]
    assert results == [
        "captured:Base", "captured:Inheriting", "override+captured:OverridingWithSuper", "override-only"
    ]
    files = exported(trace_env)
    assert sorted(files) == sorted(trace_name(cls) for cls in classes)
    assert range_names(files[trace_name(classes[0])]) == ["capture::bs=8", "capture::bs=4"]
    assert range_names(files[trace_name(classes[1])]) == ["capture::bs=2"]
    assert range_names(files[trace_name(classes[2])]) == ["capture::bs=8", "capture::bs=4"]  # one profile, not two
    assert range_names(files[trace_name(classes[3])]) == ["capture::bs=1"]
    trace = files[trace_name(classes[0])]
    assert trace["capture_trace"]["runner"] == "Base"
    assert trace["capture_trace"]["capture_bs"] == [8, 4]
    mms = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op" and e["name"] == "aten::mm"]
    assert [e["args"]["Input Dims"][0] for e in mms] == [[8, 8], [4, 8]]  # record_shapes=True


@pytest.mark.parametrize("how", ["decorator twice", "decorator and mixin", "subclass decorated again"])
def test_applied_twice_still_profiles_and_exports_once(trace_env: Path, how: str) -> None:
    if how == "decorator twice":
        runner_cls = with_capture_trace(profile="capture")(with_capture_trace(profile="capture")(
            type("Twice", (PlainRunner,), {})))
    elif how == "decorator and mixin":
        runner_cls = with_capture_trace(profile="capture")(
            type("Both", (CaptureTraceMixin, PlainRunner), {"capture_trace_profile": "capture"}))
    else:
        base = with_capture_trace(profile="capture")(type("Base2", (PlainRunner,), {}))
        runner_cls = with_capture_trace(profile="capture")(type("Sub2", (base,), {}))
    runner_cls().capture()
    files = exported(trace_env)
    assert list(files) == [trace_name(runner_cls)]
    assert range_names(files[trace_name(runner_cls)]) == ["capture::bs=8", "capture::bs=4"]


def test_token_runners_label_tokens_and_non_default_variants(trace_env: Path) -> None:
    @with_capture_trace(profile="capture", shape_unit="tokens")
    class Prefill(TokenRunner):
        pass

    Prefill().capture()
    trace = exported(trace_env)[trace_name(Prefill)]
    assert range_names(trace) == [
        "capture::tokens=512", "capture::tokens=256", "capture::tokens=256,prefix_num_chunks=2"
    ]


def test_switch_off_or_flag_off_calls_the_method_and_nothing_else(
    trace_env: Path, monkeypatch: pytest.MonkeyPatch, profilers_started: list[Any]
) -> None:
    """Off (either switch): no profiler created or started, no range, no export — the method only."""
    import torch

    @with_capture_trace(profile="capture")
    class Quiet(PlainRunner):
        pass

    created = profilers_started
    ranges: list[str] = []
    real_range = torch.profiler.record_function

    def range_spy(name: str, *args: Any) -> Any:
        ranges.append(name)
        return real_range(name, *args)

    monkeypatch.setattr(torch.profiler, "record_function", range_spy)
    monkeypatch.setenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", "0")
    assert Quiet().capture() == "captured:Quiet"
    monkeypatch.setenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", "1")
    runner = Quiet()
    runner.enable_profile_cuda_graph = False  # type: ignore[attr-defined]
    assert runner.capture() == "captured:Quiet"
    assert (created, ranges, exported(trace_env)) == ([], [], {})
    Quiet().capture()  # and on: one profiler, two ranges, one file
    assert len(created) == 1 and len(ranges) == 2 and list(exported(trace_env)) == [trace_name(Quiet)]


def test_switch_off_adds_no_call_on_the_capture_path(trace_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every Python function called during capture() with the switch off: the runner's own, our two
    wrappers' bodies and the switch read — no profiler, exporter or torch.profiler code at all."""

    @with_capture_trace(profile="capture")
    class Counted(PlainRunner):
        pass

    monkeypatch.setenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", "0")
    runner = Counted()
    runner.capture()  # warm caches (imports, signatures)
    called = python_calls(runner.capture)
    ours = {c.rsplit(":", 1)[1] for c in called if "/mixins/" in c}
    assert not any("torch/profiler" in c or "torch/autograd/profiler" in c for c in called), called
    # the one wrapper core, the instance binding and the switch read (settings re-exports the switches module's)
    assert ours <= {"capture_wrapper", "bind_instance"}, ours
    assert any("_sglang_capture_trace_switches" in c for c in called)  # the switch was read, per call


def test_a_profiler_already_recording_is_left_alone(trace_env: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Nested profilers: with sglang's or the user's profiler active in this thread, ours does not start
    (the capture is in theirs) and we export nothing; the labels still go into their profile."""
    import torch

    @with_capture_trace(profile="capture")
    class Nested(PlainRunner):
        pass

    with caplog.at_level(logging.DEBUG, logger="mixins"):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as outer:
            assert Nested().capture() == "captured:Nested"
    assert exported(trace_env) == {}
    assert "already recording in this process" in caplog.text
    names = {e.name for e in outer.events()}
    assert {"capture::bs=8", "capture::bs=4"} <= names


def test_exceptions_pass_through_and_nothing_is_exported(trace_env: Path) -> None:
    import torch

    @with_capture_trace(profile="capture")
    class Failing(PlainRunner):
        def capture(self) -> str:
            raise ValueError("capture failed")

    with pytest.raises(ValueError, match="capture failed"):
        Failing().capture()
    assert not torch.autograd._profiler_enabled()  # our profiler was stopped
    assert exported(trace_env) == {}


def test_profile_mode_options_are_checked() -> None:
    with pytest.raises(TypeError, match="no method 'capture_all' to profile"):
        with_capture_trace(profile="capture_all")(type("NoSuch", (PlainRunner,), {}))
    with pytest.raises(TypeError, match="names the method to profile"):
        with_capture_trace(profile=True)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="bs, tokens"):
        with_capture_trace(profile="capture", shape_unit="rows")
    # profile mode needs no post-profile hook
    assert with_capture_trace(profile="capture")(type("NoHook", (PlainRunner,), {})).__name__ == "NoHook"


def test_capture_profiler_is_configured_like_sglangs_decode_profile() -> None:
    import torch

    class Cpu:
        device = "cpu"

    prof = capture_profiler(Cpu())
    assert prof.record_shapes is True and prof.profile_memory is False
    assert set(prof.activities) == {torch.profiler.ProfilerActivity.CPU}
    cuda = type("Cuda", (), {"model_runner": type("MR", (), {"device": "cuda"})()})()
    expected = {torch.profiler.ProfilerActivity.CPU}
    if torch.profiler.ProfilerActivity.CUDA in torch.profiler.supported_activities():
        expected.add(torch.profiler.ProfilerActivity.CUDA)
    assert set(capture_profiler(cuda).activities) == expected


def test_tokens_label_from_signature() -> None:
    runner = TokenRunner()
    assert shape_label(TokenRunner.capture_one_shape, runner, (8192,), {}, "tokens") == "capture::tokens=8192"
    assert (shape_label(TokenRunner.capture_one_shape, runner, (8192,), {"prefix_num_chunks": 4}, "tokens")
            == "capture::tokens=8192,prefix_num_chunks=4")


# -- the sglang rows' decisions on synthetic classes (the real ones: tests/sglang) -------------------


def _profile_row_status(body: dict[str, Any], flag_source: dict[str, Any] | None = None) -> Any:
    import types

    from mixins.sglang_patch import SglangPatch
    from mixins.sglang_targets import Strategy, Target

    module = types.ModuleType("capture_trace_synthetic_runner")
    module.Runner = type("Runner", (), {"__module__": module.__name__, **body})  # type: ignore[attr-defined]
    target = Target(module.__name__, "Runner", "capture", Strategy.PROFILE_CAPTURE, why="", drop_when="",
                    note="", read_in=(), capture_path=("_capture",))
    sys.modules[module.__name__] = module
    patch = SglangPatch((target,), tag="synthetic")
    try:
        (status,) = patch.install()
        return status, module.Runner, patch
    finally:
        del sys.modules[module.__name__]


def test_a_runner_that_profiles_natively_is_deferred_to() -> None:
    """Structural: the decode runners' helper on the class, or `profile` used on the capture path."""
    from mixins.sglang_patch import State

    def capture(self: Any) -> None:
        self._capture()

    def _capture_profiling(self: Any) -> None:
        with profile():  # type: ignore[name-defined]  # noqa: F821 - never called: only its code names
            pass

    for body, why in (
        ({"capture": capture, "_init_profile_context_and_memory_record": lambda self: None},
         "has _init_profile_context_and_memory_record"),
        ({"capture": capture, "_capture": _capture_profiling}, "_capture uses profile"),
    ):
        status, runner, patch = _profile_row_status(body)
        patch.uninstall()
        assert status.state is State.DEFERRED and why in status.reason, status
        assert "capture" in vars(runner) and vars(runner)["capture"] is body["capture"]  # left unwrapped


def test_a_runner_sglang_does_not_profile_is_profiled_only_when_sglang_asks(
    trace_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The flag as sglang stores it on the runner: on → one trace; off → the capture only."""
    import torch

    from mixins.sglang_patch import PROFILED_BY_US, State

    def capture(self: Any) -> None:
        self._capture()

    def _capture(self: Any) -> None:
        torch.ones(3).sum()

    status, runner_cls, patch = _profile_row_status({"capture": capture, "_capture": _capture})
    try:
        assert status.state is State.APPLIED and status.reason == PROFILED_BY_US
        off = runner_cls()
        off.enable_profile_cuda_graph = False
        off.capture()
        assert exported(trace_env) == {}
        on = runner_cls()
        on.enable_profile_cuda_graph = True
        on.capture()
        assert list(exported(trace_env)) == ["cuda_graph_capture-Runner-TP-0.json.gz"]
        unknown = runner_cls()  # no flag anywhere sglang keeps it: off (sglang would not profile)
        unknown.capture()
        assert list(exported(trace_env)) == ["cuda_graph_capture-Runner-TP-0.json.gz"]
    finally:
        patch.uninstall()


@pytest.mark.parametrize("owner", ["model_runner", "eagle_worker"])
def test_the_flag_is_read_from_the_server_args_the_runner_holds(owner: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without its own copy or a published config, the flag is its owner's ``server_args`` one: the model
    runner's, or the draft worker's for the single-graph multi-layer EAGLE runner (no model runner)."""
    import types

    from mixins.sglang_patch import profiling_requested

    monkeypatch.delitem(sys.modules, "sglang.srt.runtime_context", raising=False)
    monkeypatch.delitem(sys.modules, "sglang.srt.server_args", raising=False)
    for flag in (True, False):
        server_args = types.SimpleNamespace(enable_profile_cuda_graph=flag)
        runner = types.SimpleNamespace(**{owner: types.SimpleNamespace(server_args=server_args)})
        assert profiling_requested(runner) is flag
    elsewhere = types.SimpleNamespace(server_args=types.SimpleNamespace(enable_profile_cuda_graph=True))
    assert profiling_requested(types.SimpleNamespace(other=elsewhere)) is False  # not an owner sglang has


def test_a_capture_that_runs_its_own_profiler_never_takes_the_process_down(tmp_path: Path) -> None:
    """A capture method that runs its own ``torch.profiler.profile`` in the same thread ends (or takes over)
    the one Kineto session ours started: exporting ours then crashed the process in Kineto (rc 139). Now
    the process lives, nothing is exported from a session that is not ours, one WARNING per capture."""
    done = run_case("capture_runs_its_own_profiler", env=export_env(tmp_path))
    assert done.stdout.split() == ["alive"]
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING ")]
    assert len(warnings) == 3, done.stderr
    for runner, warning in zip(("EndsOurs", "TakesOver", "LazyRunner"), warnings, strict=True):
        assert f"CUDA graph capture trace of {runner} not saved" in warning
        assert "another profiler started inside the capture" in warning
