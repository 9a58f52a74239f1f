"""The class decorator and the mixin in both modes: hook mode (the runner profiles its capture and calls its
post-profile hook with the profile: exported after the hook) and profile mode (a runner that profiles
nothing: our own real CPU ``torch.profiler.profile`` runs around the named method, exported after it).
The same exactly-once rules in both: subclasses, ``super()`` chains, applied twice; off is the method only."""

from __future__ import annotations

import inspect
import logging
import pickle
import sys
from pathlib import Path
from typing import Any

import pytest
from core_helpers import (
    export_env,
    exported,
    kineto_profile,
    mm_profile,
    python_calls,
    range_names,
    run_case,
    trace_name,
)

from mixins import CaptureTraceMixin, with_capture_trace
from mixins.capture_trace import capture_profiler, shape_label
from mixins.patching import is_wrapped

HOOK = "_post_process_after_profile"


class _Shapes:
    """A per-shape loop: one (bs x 8) @ (8 x 3) matmul per batch size, so a trace's ops say which runner ran."""

    capture_bs = [8, 4]
    calls = 0

    def capture_one_batch_size(self, bs: int, variant: str = "plain") -> Any:
        import torch

        return torch.mm(torch.ones(bs, 8), torch.ones(8, 3))

    def loop(self) -> None:
        for bs in self.capture_bs:
            self.capture_one_batch_size(bs)


class HookRunner(_Shapes):
    """Shaped like sglang's decode runners: capture() profiles the loop (``kineto_profile``: not through
    ``torch.profiler.profile``, which ``profilers_started`` counts as ours), then calls the hook."""

    def capture(self) -> str:
        with kineto_profile(record_shapes=True) as prof:
            self.loop()
        return self._post_process_after_profile(prof)

    def _post_process_after_profile(self, prof_context: Any) -> str:
        type(self).calls += 1
        return f"done:{type(self).__name__}"


class PlainRunner(_Shapes):
    """A user runner with no profiler of its own: capture() is the loop."""

    def capture(self) -> str:
        type(self).calls += 1
        self.loop()
        return f"done:{type(self).__name__}"


#: mode -> (base runner, decorator options, mixin attributes, the method the wrapper is around)
MODES: dict[str, tuple[type[_Shapes], dict[str, Any], dict[str, Any], str]] = {
    "hook": (HookRunner, {}, {}, HOOK),
    "profile": (PlainRunner, {"profile": "capture"}, {"capture_trace_profile": "capture"}, "capture"),
}


def _decorated(mode: str, name: str = "Base", bases: tuple[type, ...] = ()) -> Any:
    base, options, _, _ = MODES[mode]
    return with_capture_trace(**options)(type(name, bases or (base,), {}))


def _mixed(mode: str, name: str = "Base") -> Any:
    base, _, attributes, _ = MODES[mode]
    return type(name, (CaptureTraceMixin, base), dict(attributes))


def _override(mode: str, name: str, parent: type, *, call_super: bool, capture_bs: list[int] | None = None) -> Any:
    """A subclass overriding the wrapped method: ``override+`` and the parent's result, or only its own."""
    method = MODES[mode][3]

    def override(self: Any, *args: Any) -> str:
        if call_super:
            return "override+" + getattr(super(cls, self), method)(*args)
        if mode == "profile":
            self.loop()
        return "override-only"

    body: dict[str, Any] = {method: override}
    if capture_bs is not None:
        body["capture_bs"] = capture_bs
    cls: type = type(name, (parent,), body)
    return cls


def _assert_shapes(trace: dict[str, Any], sizes: list[int]) -> None:
    """One labelled segment per batch size, each holding its own matmul (record_shapes)."""
    assert range_names(trace) == [f"capture::bs={bs}" for bs in sizes]
    mms = [e for e in trace["traceEvents"] if e.get("cat") == "cpu_op" and e["name"] == "aten::mm"]
    assert [e["args"]["Input Dims"] for e in mms] == [[[bs, 8], [8, 3]] for bs in sizes]


@pytest.mark.parametrize("apply", ["decorator", "mixin"])
@pytest.mark.parametrize("mode", list(MODES))
def test_hierarchy_exports_exactly_one_file_per_runner_class(trace_env: Path, mode: str, apply: str) -> None:
    base = _decorated(mode) if apply == "decorator" else _mixed(mode)
    classes = (
        base,
        type("Inheriting", (base,), {"capture_bs": [2]}),
        _override(mode, "OverridingWithSuper", base, call_super=True),
        _override(mode, "OverridingWithoutSuper", base, call_super=False, capture_bs=[1]),
    )
    results = [cls().capture() for cls in classes]
    assert results == ["done:Base", "done:Inheriting", "override+done:OverridingWithSuper", "override-only"]
    files = exported(trace_env)
    assert sorted(files) == sorted(trace_name(cls) for cls in classes)
    for cls, sizes in zip(classes, ([8, 4], [2], [8, 4], [1]), strict=True):  # a super() chain: one profile
        trace = files[trace_name(cls)]
        _assert_shapes(trace, sizes)
        assert trace["capture_trace"]["runner"] == cls.__name__
        assert trace["capture_trace"]["runner_class"].endswith(cls.__qualname__)
        assert trace["capture_trace"]["capture_bs"] == sizes


@pytest.mark.parametrize("how", ["twice", "class-and-subclass", "decorator-and-mixin"])
@pytest.mark.parametrize("mode", list(MODES))
def test_applied_twice_still_runs_and_exports_once(trace_env: Path, mode: str, how: str) -> None:
    if how == "twice":
        target = with_capture_trace(**MODES[mode][1])(_decorated(mode, "Target"))
    elif how == "class-and-subclass":
        target = with_capture_trace(**MODES[mode][1])(_override(mode, "Target", _decorated(mode), call_super=True))
    else:
        target = with_capture_trace(**MODES[mode][1])(_mixed(mode, "Target"))
    target.calls = 0
    target().capture()
    assert target.calls == 1
    files = exported(trace_env)
    assert list(files) == ["cuda_graph_capture-Target-TP-0.json.gz"]
    _assert_shapes(files[trace_name(target)], [8, 4])


@pytest.fixture
def ranges(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of every ``record_function`` range opened during the test (torch's own ranges still open)."""
    import torch

    opened: list[str] = []
    real = torch.profiler.record_function

    def record(name: str, *args: Any) -> Any:
        opened.append(name)
        return real(name, *args)

    monkeypatch.setattr(torch.profiler, "record_function", record)
    return opened


@pytest.mark.parametrize("mode", list(MODES))
def test_switch_off_or_flag_off_calls_the_method_and_nothing_else(
    trace_env: Path, monkeypatch: pytest.MonkeyPatch, profilers_started: list[Any], ranges: list[str], mode: str
) -> None:
    """Off (our switch, or the runner's ``enable_profile_cuda_graph`` False): no profiler of ours, no range,
    no export — the method only. Absent flag: on."""
    quiet = _decorated(mode, "Quiet")
    monkeypatch.setenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", "false")
    assert quiet().capture() == "done:Quiet"
    monkeypatch.setenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", "1")
    runner = quiet()
    runner.enable_profile_cuda_graph = False
    assert runner.capture() == "done:Quiet"
    assert (profilers_started, ranges, exported(trace_env)) == ([], [], {})
    assert not trace_env.exists()  # not even the directory
    quiet().capture()  # and on: our profiler in profile mode only, two ranges, one file
    assert len(profilers_started) == int(mode == "profile") and len(ranges) == 2
    assert list(exported(trace_env)) == [trace_name(quiet)]


@pytest.mark.parametrize("mode", list(MODES))
def test_exceptions_pass_through_and_nothing_is_exported(trace_env: Path, mode: str) -> None:
    import torch

    def fail(self: Any, *args: Any) -> str:
        raise KeyError("boom")

    failing = with_capture_trace(**MODES[mode][1])(type("Failing", (MODES[mode][0],), {MODES[mode][3]: fail}))
    with pytest.raises(KeyError, match="boom"):
        failing().capture()
    assert not torch.autograd._profiler_enabled()  # our profiler (or the runner's) was stopped
    assert exported(trace_env) == {}


@pytest.mark.parametrize("mode", list(MODES))
def test_export_failure_never_breaks_the_capture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 caplog: pytest.LogCaptureFixture, mode: str) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", "1")
    monkeypatch.setenv("SGLANG_TORCH_PROFILER_DIR", str(blocker / "sub"))
    monkeypatch.delenv("SGLANG_CAPTURE_TRACE_STRICT", raising=False)
    survivor = _decorated(mode, "Survivor")
    with caplog.at_level(logging.WARNING, logger="mixins"):
        assert survivor().capture() == "done:Survivor"
    assert "Survivor" in caplog.text and "NotADirectoryError" in caplog.text
    monkeypatch.setenv("SGLANG_CAPTURE_TRACE_STRICT", "1")
    with pytest.raises(NotADirectoryError):
        survivor().capture()


class PicklableRunner(HookRunner):
    pass


with_capture_trace(PicklableRunner)


def test_decorator_returns_the_same_class_and_keeps_its_behaviour() -> None:
    class Plain(HookRunner):
        pass

    signature = inspect.signature(Plain._post_process_after_profile)
    decorated = with_capture_trace(Plain)
    assert decorated is Plain
    assert isinstance(Plain(), HookRunner) and issubclass(Plain, HookRunner)
    assert inspect.signature(Plain._post_process_after_profile) == signature
    assert is_wrapped(vars(Plain)["_post_process_after_profile"])
    instance = pickle.loads(pickle.dumps(PicklableRunner()))
    assert type(instance) is PicklableRunner


def test_options_and_bad_targets_are_refused_where_they_are_written() -> None:
    class WithOtherHook:
        def after(self, prof: Any) -> None:
            pass

    assert with_capture_trace(hook="after", shape_method=None)(WithOtherHook) is WithOtherHook
    with pytest.raises(TypeError, match="has no method '_post_process_after_profile'"):
        with_capture_trace(WithOtherHook)
    with pytest.raises(TypeError, match="decorates a class"):
        with_capture_trace(lambda: None)  # type: ignore[call-overload]  # the wrong type is the point
    with pytest.raises(TypeError, match="no per-shape method 'capture_one'"):
        with_capture_trace(hook="after", shape_method="capture_one")(WithOtherHook)
    with pytest.raises(TypeError, match="no method 'capture_all' to profile"):
        with_capture_trace(profile="capture_all")(type("NoSuch", (PlainRunner,), {}))
    with pytest.raises(TypeError, match="names the method to profile"):
        with_capture_trace(profile=True)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="bs, tokens"):
        with_capture_trace(profile="capture", shape_unit="rows")
    # profile mode needs no post-profile hook
    assert with_capture_trace(profile="capture")(type("NoHook", (PlainRunner,), {})).__name__ == "NoHook"


def test_hook_called_through_the_class_with_explicit_self(trace_env: Path) -> None:
    """EAGLE runners of older sglang call ``CudaGraphRunner.capture(self)``-style unbound methods."""
    base = _decorated("hook")

    class Eagle(_Shapes):  # not a subclass: borrows Base's hook through the class
        capture_bs = [7]

        def capture(self) -> Any:
            with kineto_profile(record_shapes=True) as prof:
                self.capture_one_batch_size(7)
            return base._post_process_after_profile(self, prof_context=prof)

    assert Eagle().capture() == "done:Eagle"
    trace = exported(trace_env)["cuda_graph_capture-Eagle-TP-0.json.gz"]
    assert [e["args"]["Input Dims"] for e in trace["traceEvents"] if e.get("name") == "aten::mm"] == [[[7, 8], [8, 3]]]


def test_a_classmethod_hook_is_named_by_its_class_and_a_staticmethod_is_refused(trace_env: Path) -> None:
    """A classmethod's runner is its class (the trace was named ``type``); a staticmethod hook has no runner
    to name the trace by (its profile was taken for the runner, and nothing exported): refused up front."""
    @with_capture_trace
    class ClassHook:
        @classmethod
        def _post_process_after_profile(cls, prof_context: Any) -> str:
            return "cls"

    assert ClassHook()._post_process_after_profile(mm_profile(1, 3)) == "cls"
    assert list(exported(trace_env)) == ["cuda_graph_capture-ClassHook-TP-0.json.gz"]
    with pytest.raises(TypeError, match=r"StaticHook._post_process_after_profile is a staticmethod: make it a method"):

        @with_capture_trace
        class StaticHook:
            @staticmethod
            def _post_process_after_profile(prof_context: Any) -> None:
                pass


class _ModelRunner:
    def __init__(self, is_draft_worker: bool, tp_rank: int = 0) -> None:
        self.is_draft_worker = is_draft_worker
        self.tp_rank = tp_rank


@pytest.mark.parametrize("apply", ["decorator", "mixin"])
def test_draft_worker_plain_base_runner_is_named_draft(trace_env: Path, apply: str) -> None:
    def __init__(self: Any, draft: bool) -> None:
        self.model_runner = _ModelRunner(draft, tp_rank=2)

    if apply == "decorator":
        decode = with_capture_trace(draft_base=True)(type("DecodeRunner", (HookRunner,), {"__init__": __init__}))
    else:
        body = {"__init__": __init__, "capture_trace_draft_base": True}
        decode = type("DecodeRunner", (CaptureTraceMixin, HookRunner), body)
    eagle_draft = type("EagleDraftRunner", (decode,), {})  # a draft subclass keeps its own name
    decode(draft=False).capture()
    decode(draft=True).capture()
    eagle_draft(draft=True).capture()
    assert sorted(exported(trace_env)) == [
        "cuda_graph_capture-DecodeRunner-TP-2.json.gz",
        "cuda_graph_capture-DraftDecodeRunner-TP-2.json.gz",
        "cuda_graph_capture-EagleDraftRunner-TP-2.json.gz",
    ]


def test_a_profiler_already_recording_is_left_alone(trace_env: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Profile mode under sglang's or the user's profiler active in this thread: ours does not start (the
    capture is in theirs) and we export nothing; the labels still go into their profile."""
    import torch

    nested = _decorated("profile", "Nested")
    with caplog.at_level(logging.DEBUG, logger="mixins"):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as outer:
            assert nested().capture() == "done:Nested"
    assert exported(trace_env) == {}
    assert "already recording in this process" in caplog.text
    assert {"capture::bs=8", "capture::bs=4"} <= {e.name for e in outer.events()}


@pytest.mark.parametrize("mode", list(MODES))
def test_switch_off_adds_no_call_on_the_capture_path(
    trace_env: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """Every Python function called with the switch off while the wrapped method runs (profile mode: the
    whole capture; hook mode: the hook): the runner's own, the one wrapper core, the instance binding and
    the switch read — no profiler, exporter or snapshot code at all."""
    runner = _decorated(mode, "Counted")()
    monkeypatch.setenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", "0")
    method, args = getattr(runner, MODES[mode][3]), (None,) if mode == "hook" else ()
    method(*args)  # warm caches (imports, signatures)
    called = python_calls(lambda: method(*args))
    ours = {c.rsplit(":", 1)[1] for c in called if "/mixins/" in c}
    assert not any("torch/profiler" in c or "torch/autograd/profiler" in c for c in called), called
    assert ours <= {"capture_wrapper", "bind_instance"}, ours
    assert any("_sglang_capture_trace_switches" in c for c in called)  # the switch was read, per call


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


# -- per-shape segments ------------------------------------------------------------------------------


class ShapeRunner:
    enable_profile_cuda_graph = True
    capture_bs = [8, 4]

    def capture(self) -> None:
        import torch

        with torch.profiler.profile(record_shapes=True) as prof:
            for bs in self.capture_bs:
                self.capture_one_shape(bs, self.forward)
                self.capture_one_shape(bs, self.forward, variant_label="sparse")
                self.capture_one_shape(bs, self.forward, 1, "dense")
            self.capture_one_shape(4, self.forward)  # a repeat of one size
        self._post_process_after_profile(prof)

    def forward(self, bs: int) -> Any:
        import torch

        return torch.mm(torch.ones(bs, 8), torch.ones(8, 3))

    def capture_one_shape(self, size: int, forward: Any, stream_idx: int | None = None,
                          variant_label: str | None = None) -> Any:
        return forward(size)

    def _post_process_after_profile(self, prof: Any) -> None:
        pass


def test_segments_labelled_from_call_arguments(trace_env: Path) -> None:
    @with_capture_trace
    class Labelled(ShapeRunner):
        pass

    Labelled().capture()
    trace = exported(trace_env)["cuda_graph_capture-Labelled-TP-0.json.gz"]
    assert range_names(trace) == [
        "capture::bs=8", "capture::bs=8,variant=sparse", "capture::bs=8,variant=dense,stream=1",
        "capture::bs=4", "capture::bs=4,variant=sparse", "capture::bs=4,variant=dense,stream=1",
        "capture::bs=4",
    ]
    assert trace["capture_trace"]["capture_bs"] == [8, 4]
    # each mm ran inside its own segment
    segments = [e for e in trace["traceEvents"] if e.get("cat") == "user_annotation"]
    for mm in (e for e in trace["traceEvents"] if e.get("name") == "aten::mm"):
        owners = [s for s in segments if s["ts"] <= mm["ts"] <= s["ts"] + s["dur"]]
        assert len(owners) == 1
        assert owners[0]["name"].startswith(f"capture::bs={mm['args']['Input Dims'][0][0]}")


def test_token_runners_label_tokens_and_non_default_variants(trace_env: Path) -> None:
    class TokenRunner:
        capture_num_tokens = [512, 256]

        def capture(self) -> None:
            for n in self.capture_num_tokens:
                self.capture_one_shape(n)
            self.capture_one_shape(256, prefix_num_chunks=2)

        def capture_one_shape(self, size: int, *, prefix_num_chunks: int = 0) -> Any:
            import torch

            return torch.ones(size, 4).sum()

    prefill = with_capture_trace(profile="capture", shape_unit="tokens")(type("Prefill", (TokenRunner,), {}))
    prefill().capture()
    trace = exported(trace_env)[trace_name(prefill)]
    assert range_names(trace) == [
        "capture::tokens=512", "capture::tokens=256", "capture::tokens=256,prefix_num_chunks=2"
    ]


class _Old:
    def capture_one_batch_size(self, bs: int, forward: Any) -> None:
        pass


class _Decode:  # capture_one_shape's signature as in sglang 0.5.20-0.5.23 (read from the wheels)
    def capture_one_shape(self, size: int, forward: Any, stream_idx: int | None = None,
                          variant_label: str | None = None, attention_variant: str | None = None) -> None:
        pass


class _Future:
    def capture_one_shape(
        self, size: int, forward: Any, *, prefix_num_chunks: int = 0, skip_cross_attention: bool = False
    ) -> None:
        pass


@pytest.mark.parametrize(("method", "instance", "args", "kwargs", "unit", "label"), [
    # older sglang's signature, positional or by name; a bound method; arguments that do not bind: none
    (_Old.capture_one_batch_size, _Old(), (16, None), {}, "bs", "capture::bs=16"),
    (_Old.capture_one_batch_size, _Old(), (), {"bs": 2, "forward": None}, "bs", "capture::bs=2"),
    (_Old().capture_one_batch_size, None, (3, None), {}, "bs", "capture::bs=3"),
    (_Old.capture_one_batch_size, _Old(), (), {}, "bs", None),
    # sglang 0.5.20+: each size once per (LoRA variant x attention variant) and per stream, positionally
    (_Decode.capture_one_shape, _Decode(), (8, None, 1, "lora", "sparse"), {}, "bs",
     "capture::bs=8,variant=lora,stream=1,attention=sparse"),
    (_Decode.capture_one_shape, _Decode(), (8, None), {"attention_variant": "dense"}, "bs",
     "capture::bs=8,attention=dense"),
    # arguments we do not know by name: named when scalar and not at their default
    (_Future.capture_one_shape, _Future(), (4, None), {}, "bs", "capture::bs=4"),
    (_Future.capture_one_shape, _Future(), (4, None), {"prefix_num_chunks": 0}, "bs", "capture::bs=4"),
    (_Future.capture_one_shape, _Future(), (4, None), {"prefix_num_chunks": 2}, "bs",
     "capture::bs=4,prefix_num_chunks=2"),
    (_Future.capture_one_shape, _Future(), (4, print), {"skip_cross_attention": True}, "bs",
     "capture::bs=4,skip_cross_attention=True"),
    (_Future.capture_one_shape, _Future(), (8192, None), {}, "tokens", "capture::tokens=8192"),
    (_Future.capture_one_shape, _Future(), (8192, None), {"prefix_num_chunks": 4}, "tokens",
     "capture::tokens=8192,prefix_num_chunks=4"),
])
def test_shape_label_from_the_calls_own_arguments(method: Any, instance: Any, args: tuple[Any, ...],
                                                  kwargs: dict[str, Any], unit: str, label: str | None) -> None:
    assert shape_label(method, instance, args, kwargs, unit) == label


def test_every_combination_of_variants_and_streams_gets_its_own_label() -> None:
    calls = [(8, None, stream, lora, attention) for stream in (None, 1) for lora in (None, "lora", "nolora")
             for attention in (None, "dense", "sparse")]
    assert len({shape_label(_Decode.capture_one_shape, _Decode(), call, {}) for call in calls}) == len(calls)


def test_no_annotation_when_not_profiling_or_switched_off(
    trace_env: Path, monkeypatch: pytest.MonkeyPatch, ranges: list[str]
) -> None:
    @with_capture_trace
    class Quiet(ShapeRunner):
        pass

    runner = Quiet()
    assert runner.capture_one_shape(2, runner.forward).shape == (2, 3)  # no profiler running
    monkeypatch.setenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", "0")
    runner.capture()
    assert ranges == []
    monkeypatch.setenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", "1")
    runner.capture()
    assert len(ranges) == 7


# -- the sglang rows' decisions on synthetic classes (the real ones: tests/sglang) -------------------


def _profile_row_status(body: dict[str, Any]) -> Any:
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


def test_a_runner_sglang_does_not_profile_is_profiled_only_when_sglang_asks(trace_env: Path) -> None:
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
