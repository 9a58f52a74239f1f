from __future__ import annotations

import inspect
import logging
import pickle
from pathlib import Path
from typing import Any

import pytest
from core_helpers import exported, matmul_work, op_shapes, profile_of, range_names, trace_name

from mixins import CaptureTraceMixin, with_capture_trace
from mixins.capture_trace import shape_label
from mixins.patching import is_wrapped


class Runner:
    """Shaped like sglang's runners: capture() profiles, then calls the hook with the profile."""

    rows = 1
    hook_calls = 0

    def capture(self) -> Any:
        return self._post_process_after_profile(profile_of(matmul_work(self.rows)))

    def _post_process_after_profile(self, prof_context: Any) -> str:
        type(self).hook_calls += 1
        return f"hooked:{type(self).__name__}"


class PicklableRunner(Runner):
    pass


with_capture_trace(PicklableRunner)


def _hierarchy(apply: str) -> tuple[type[Runner], type[Runner], type[Runner], type[Runner]]:
    if apply == "decorator":
        @with_capture_trace
        class Base(Runner):
            rows = 2
    else:
        class Base(CaptureTraceMixin, Runner):  # type: ignore[no-redef]
            rows = 2

    class Inheriting(Base):
        rows = 3

    class OverridingWithSuper(Base):
        rows = 4

        def _post_process_after_profile(self, prof: Any) -> str:
            return "override+" + super()._post_process_after_profile(prof)

    class OverridingWithoutSuper(Base):
        rows = 5

        def _post_process_after_profile(self, prof: Any) -> str:
            return "override-only"

    return Base, Inheriting, OverridingWithSuper, OverridingWithoutSuper


@pytest.mark.parametrize("apply", ["decorator", "mixin"])
def test_hierarchy_exports_exactly_one_file_per_runner_class(trace_env: Path, apply: str) -> None:
    classes = _hierarchy(apply)
    results = [cls().capture() for cls in classes]
    assert results == ["hooked:Base", "hooked:Inheriting", "override+hooked:OverridingWithSuper", "override-only"]
    files = exported(trace_env)
    assert sorted(files) == sorted(trace_name(cls) for cls in classes)
    for cls in classes:
        trace = files[trace_name(cls)]
        assert op_shapes(trace) == [[[cls.rows, 8], [8, 3]]]  # the ops that runner ran
        assert trace["capture_trace"]["runner"] == cls.__name__
        assert trace["capture_trace"]["runner_class"].endswith(cls.__qualname__)


def test_decorator_returns_the_same_class_and_keeps_its_behaviour() -> None:
    class Plain(Runner):
        pass

    signature = inspect.signature(Plain._post_process_after_profile)
    decorated = with_capture_trace(Plain)
    assert decorated is Plain
    assert isinstance(Plain(), Runner) and issubclass(Plain, Runner)
    assert inspect.signature(Plain._post_process_after_profile) == signature
    assert is_wrapped(vars(Plain)["_post_process_after_profile"])
    instance = pickle.loads(pickle.dumps(PicklableRunner()))
    assert type(instance) is PicklableRunner


def test_options_form_and_bad_targets() -> None:
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


def test_return_value_and_exceptions_pass_through(trace_env: Path) -> None:
    @with_capture_trace
    class Failing(Runner):
        def _post_process_after_profile(self, prof: Any) -> str:
            raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        Failing().capture()
    assert exported(trace_env) == {}


@pytest.mark.parametrize("how", ["twice", "class-and-subclass", "decorator-and-mixin"])
def test_double_application_still_exports_once_per_hook_call(trace_env: Path, how: str) -> None:
    if how == "twice":
        class Target(Runner):
            pass

        with_capture_trace(with_capture_trace(Target))
    elif how == "class-and-subclass":
        @with_capture_trace
        class Parent(Runner):
            pass

        @with_capture_trace
        class Target(Parent):  # type: ignore[no-redef]
            def _post_process_after_profile(self, prof: Any) -> str:
                return super()._post_process_after_profile(prof)
    else:
        @with_capture_trace
        class Target(CaptureTraceMixin, Runner):  # type: ignore[no-redef]
            pass

    Target.hook_calls = 0
    Target().capture()
    assert Target.hook_calls == 1
    assert list(exported(trace_env)) == ["cuda_graph_capture-Target-TP-0.json.gz"]


def test_hook_called_through_the_class_with_explicit_self(trace_env: Path) -> None:
    """EAGLE runners of older sglang call ``CudaGraphRunner.capture(self)``-style unbound methods."""

    @with_capture_trace
    class Base(Runner):
        pass

    class Eagle:  # not a subclass: borrows Base's methods through the class
        enable_profile_cuda_graph = True
        hook_calls = 0

        def capture(self) -> Any:
            return Base._post_process_after_profile(self, prof_context=profile_of(matmul_work(7)))  # type: ignore[arg-type]

    assert Eagle().capture() == "hooked:Eagle"
    trace = exported(trace_env)["cuda_graph_capture-Eagle-TP-0.json.gz"]
    assert op_shapes(trace) == [[[7, 8], [8, 3]]]


def test_a_classmethod_hook_is_named_by_its_class_and_a_staticmethod_is_refused(trace_env: Path) -> None:
    """A classmethod's runner is its class (the trace was named ``type``); a staticmethod hook has no runner
    to name the trace by (its profile was taken for the runner, and nothing exported): refused up front."""

    @with_capture_trace
    class ClassHook:
        @classmethod
        def _post_process_after_profile(cls, prof_context: Any) -> str:
            return "cls"

    assert ClassHook()._post_process_after_profile(profile_of(matmul_work(3))) == "cls"
    assert list(exported(trace_env)) == ["cuda_graph_capture-ClassHook-TP-0.json.gz"]
    with pytest.raises(TypeError, match=r"StaticHook._post_process_after_profile is a staticmethod: make it a method"):

        @with_capture_trace
        class StaticHook:
            @staticmethod
            def _post_process_after_profile(prof_context: Any) -> None:
                pass


def test_switch_or_profiling_flag_off_runs_the_hook_and_writes_nothing(
    trace_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner's ``enable_profile_cuda_graph`` False, or our switch off: the hook only. Absent: on."""

    @with_capture_trace
    class Flagged(Runner):
        enable_profile_cuda_graph = False

    assert Flagged().capture() == "hooked:Flagged"
    Flagged.enable_profile_cuda_graph = True
    monkeypatch.setenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", "false")
    assert Flagged().capture() == "hooked:Flagged"
    assert not trace_env.exists()
    monkeypatch.setenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", "1")
    del Flagged.enable_profile_cuda_graph
    Flagged().capture()
    assert list(exported(trace_env)) == ["cuda_graph_capture-Flagged-TP-0.json.gz"]


class _ModelRunner:
    def __init__(self, is_draft_worker: bool, tp_rank: int = 0) -> None:
        self.is_draft_worker = is_draft_worker
        self.tp_rank = tp_rank


@pytest.mark.parametrize("apply", ["decorator", "mixin"])
def test_draft_worker_plain_base_runner_is_named_draft(trace_env: Path, apply: str) -> None:
    if apply == "decorator":
        @with_capture_trace(draft_base=True)
        class DecodeRunner(Runner):
            def __init__(self, draft: bool) -> None:
                self.model_runner = _ModelRunner(draft, tp_rank=2)
    else:
        class DecodeRunner(CaptureTraceMixin, Runner):  # type: ignore[no-redef]
            capture_trace_draft_base = True

            def __init__(self, draft: bool) -> None:
                self.model_runner = _ModelRunner(draft, tp_rank=2)

    class EagleDraftRunner(DecodeRunner):  # a draft subclass keeps its own name
        pass

    DecodeRunner(draft=False).capture()
    DecodeRunner(draft=True).capture()
    EagleDraftRunner(draft=True).capture()
    assert sorted(exported(trace_env)) == [
        "cuda_graph_capture-DecodeRunner-TP-2.json.gz",
        "cuda_graph_capture-DraftDecodeRunner-TP-2.json.gz",
        "cuda_graph_capture-EagleDraftRunner-TP-2.json.gz",
    ]


def test_export_failure_never_breaks_the_hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", "1")
    monkeypatch.setenv("SGLANG_TORCH_PROFILER_DIR", str(blocker / "sub"))
    monkeypatch.delenv("SGLANG_CAPTURE_TRACE_STRICT", raising=False)

    @with_capture_trace
    class Survivor(Runner):
        pass

    with caplog.at_level(logging.WARNING, logger="mixins"):
        assert Survivor().capture() == "hooked:Survivor"
    assert "Survivor" in caplog.text and "NotADirectoryError" in caplog.text
    monkeypatch.setenv("SGLANG_CAPTURE_TRACE_STRICT", "1")
    with pytest.raises(NotADirectoryError):
        Survivor().capture()


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


def test_no_annotation_when_not_profiling_or_switched_off(trace_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    @with_capture_trace
    class Quiet(ShapeRunner):
        pass

    calls: list[str] = []
    real = torch.profiler.record_function

    def spy(name: str, *args: Any) -> Any:
        calls.append(name)
        return real(name, *args)

    monkeypatch.setattr(torch.profiler, "record_function", spy)
    runner = Quiet()
    assert runner.capture_one_shape(2, runner.forward).shape == (2, 3)  # no profiler running
    monkeypatch.setenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", "0")
    runner.capture()
    assert calls == []
    monkeypatch.setenv("SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE", "1")
    runner.capture()
    assert len(calls) == 7


def test_shape_label_for_older_sglang_signature() -> None:
    class Old:
        def capture_one_batch_size(self, bs: int, forward: Any) -> None:
            pass

    method = Old.capture_one_batch_size
    assert shape_label(method, Old(), (16, None), {}) == "capture::bs=16"
    assert shape_label(method, Old(), (), {"bs": 2, "forward": None}) == "capture::bs=2"
    assert shape_label(Old().capture_one_batch_size, None, (3, None), {}) == "capture::bs=3"
    assert shape_label(method, Old(), (), {}) is None  # cannot bind: no label, the call itself reports it


def test_shape_label_names_every_argument_that_distinguishes_a_capture() -> None:
    """sglang 0.5.20+ captures each size once per (LoRA variant x attention variant) and per stream,
    passing them positionally: every combination gets its own label."""

    class Decode:  # capture_one_shape's signature as in sglang 0.5.20-0.5.23 (read from the wheels)
        def capture_one_shape(
            self,
            size: int,
            forward: Any,
            stream_idx: int | None = None,
            variant_label: str | None = None,
            attention_variant: str | None = None,
        ) -> None:
            pass

    method = Decode.capture_one_shape
    calls = [
        (8, None, stream, lora, attention)
        for stream in (None, 1)
        for lora in (None, "lora", "nolora")
        for attention in (None, "dense", "sparse")
    ]
    labels = [shape_label(method, Decode(), call, {}) for call in calls]
    assert len(set(labels)) == len(calls)
    assert shape_label(method, Decode(), (8, None, 1, "lora", "sparse"), {}) == (
        "capture::bs=8,variant=lora,stream=1,attention=sparse"
    )
    assert shape_label(method, Decode(), (8, None), {"attention_variant": "dense"}) == "capture::bs=8,attention=dense"


def test_shape_label_names_unknown_scalar_arguments_that_are_not_their_default() -> None:
    class Future:
        def capture_one_shape(
            self, size: int, forward: Any, *, prefix_num_chunks: int = 0, skip_cross_attention: bool = False
        ) -> None:
            pass

    method = Future.capture_one_shape
    assert shape_label(method, Future(), (4, None), {}) == "capture::bs=4"
    assert shape_label(method, Future(), (4, None), {"prefix_num_chunks": 0}) == "capture::bs=4"
    assert shape_label(method, Future(), (4, None), {"prefix_num_chunks": 2}) == "capture::bs=4,prefix_num_chunks=2"
    assert shape_label(method, Future(), (4, print), {"skip_cross_attention": True}) == (
        "capture::bs=4,skip_cross_attention=True"
    )
