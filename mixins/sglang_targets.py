"""The sglang patch table: every class we touch, how, in which versions, why, and when to drop it.

Version facts live here and only here (in ``versions``), each read from the PyPI wheel named; the code
in ``sglang_patch`` never compares versions. Whether a row applies to the sglang at hand is decided by
structural checks on the real class (``requires`` / ``absent`` / ``code_names``), so a row written for
0.5.6-0.5.13 is a no-op on 0.5.5 or 0.5.23 without anyone asking which version is installed.

Modelled on vllm-ascend's patch notes: one entry per patch, with the upstream fact it works around.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Strategy(str, Enum):
    """How a row is applied (see ``mixins.sglang_patch`` for each implementation)."""

    #: The class defines ``_post_process_after_profile(prof)``: export after it returns (core wrapper).
    HOOK = "hook"
    #: A subclass override of the hook that never exports (XPU, NPU ``pass``): wrap the override too.
    OVERRIDE = "override"
    #: Profiling inline in ``capture()``: during the call, record the ``torch.profiler.profile`` the
    #: method creates (through its module's own ``profile`` name) and export it after the call.
    INLINE_CAPTURE = "inline_capture"
    #: The class calls ``<base>.capture(self)`` but lacks the profiling helpers that method calls:
    #: give it delegating helpers so profiling works, export through the base's wrapped hook.
    ADOPT_HOOK = "adopt_hook"
    #: The hook already calls sglang's native export: wrap the hook and replace the native function
    #: name in the hook's module with a no-op for as long as we are installed (one file, ours).
    TAKE_OVER_NATIVE = "take_over_native"
    #: Per-shape capture method: label each shape's capture as a ``record_function`` range.
    SHAPE = "shape"


@dataclass(frozen=True)
class Target:
    """One patch. ``requires``: methods the class must have (own or inherited); ``absent``: methods it
    must not have; ``own``: the method must be defined in the class's own body (not just inherited);
    ``code_names``: names the code of ``code_of`` (default: ``method``) must reference; ``base``: for
    ADOPT_HOOK, the module global naming the class whose helpers are delegated to, which must have
    ``base_requires``; ``draft_base``: name a draft worker's exact instances ``Draft{Name}``."""

    module: str
    cls: str
    method: str
    strategy: Strategy
    versions: str
    why: str
    drop_when: str
    requires: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()
    own: bool = True
    code_names: tuple[str, ...] = ()
    code_of: str | None = None
    base: str | None = None
    base_requires: tuple[str, ...] = ()
    draft_base: bool = False

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.cls}.{self.method}"


HOOK = "_post_process_after_profile"
INIT = "_init_profile_context_and_memory_record"
NATIVE_EXPORT = "export_cuda_graph_capture_trace"

_OLD = "sglang.srt.model_executor.cuda_graph_runner"
_DECODE = "sglang.srt.model_executor.runner.decode_cuda_graph_runner"
_SPEC = "sglang.srt.speculative"
_NPU = "sglang.srt.hardware_backend.npu.graph_runner.npu_graph_runner"
_XPU = "sglang.srt.hardware_backend.xpu.graph_runner.xpu_graph_runner"

_NO_NATIVE = "drop when the oldest supported sglang exports natively (0.5.14+) and native export is deferred to"

def _shape_rows(method: str, *, why: str, drop_when: str, rows: tuple[tuple[str, str, str], ...]) -> list[Target]:
    """Per-shape methods (one strategy, one reason) for several classes: (module, class, versions) each."""
    return [Target(module, cls, method, Strategy.SHAPE, versions, why, drop_when) for module, cls, versions in rows]


TARGETS: tuple[Target, ...] = (
    # -- era A: profiling inline in CudaGraphRunner.capture() ------------------------------------------
    Target(
        _OLD,
        "CudaGraphRunner",
        "capture",
        Strategy.INLINE_CAPTURE,
        versions="0.4.10, 0.5.5 (inline `profile(...)` in capture(), `from torch.profiler import profile`); "
        "0.5.6-0.5.13 use the hook instead (row skipped: class has the hook); module gone in 0.5.14+",
        why="no hook and no export: the profile only feeds key_averages tables. EAGLEDraftCudaGraphRunner "
        "and EAGLEDraftExtendCudaGraphRunner (plain classes) call CudaGraphRunner.capture(self), so this "
        "wrapper sees them as the instance and names their files after their own class",
        drop_when="drop with support for sglang < 0.5.6",
        absent=(HOOK,),
        code_names=("profile",),
        draft_base=True,
    ),
    # -- era B: hook on CudaGraphRunner, no native export ------------------------------------------------
    Target(
        _OLD,
        "CudaGraphRunner",
        HOOK,
        Strategy.HOOK,
        versions="0.5.6-0.5.13 (read: 0.5.6, 0.5.7, 0.5.8, 0.5.9, 0.5.10, 0.5.11, 0.5.12, 0.5.13); "
        "absent in 0.4.10/0.5.5; module gone in 0.5.14+",
        why="the hook logs key_averages and a memory snapshot but never writes a trace",
        drop_when=_NO_NATIVE,
        draft_base=True,
    ),
    *(
        Target(
            f"{_SPEC}.{module}",
            cls,
            HOOK,
            Strategy.ADOPT_HOOK,
            versions=versions,
            why="plain class whose capture() calls CudaGraphRunner.capture(self), which calls "
            f"self.{INIT}() and self.{HOOK}(prof): the class lacks both, so upstream raises "
            "AttributeError under --enable-profile-cuda-graph. Delegating helpers make profiling work "
            "and route the export through CudaGraphRunner's wrapped hook under this class's name",
            drop_when="drop with support for sglang < 0.5.14 (from 0.5.14 these subclass "
            "DecodeCudaGraphRunner and inherit the hook)",
            absent=(INIT, HOOK),
            own=False,
            requires=("capture",),
            code_names=("CudaGraphRunner",),
            code_of="capture",
            base="CudaGraphRunner",
            base_requires=(INIT, HOOK),
        )
        for module, cls, versions in (
            (
                "eagle_draft_cuda_graph_runner",
                "EAGLEDraftCudaGraphRunner",
                "0.5.6-0.5.13 (read each); 0.4.10/0.5.5 covered by the inline-capture row; 0.5.14+ inherit",
            ),
            (
                "eagle_draft_extend_cuda_graph_runner",
                "EAGLEDraftExtendCudaGraphRunner",
                "0.5.6-0.5.13 (read each); 0.4.10/0.5.5 covered by the inline-capture row; 0.5.14+ inherit",
            ),
            (
                "multi_layer_eagle_draft_extend_cuda_graph_runner",
                "MultiLayerEagleDraftExtendCudaGraphRunner",
                "0.5.7-0.5.13 (read each; module absent in 0.5.6); 0.5.14+ inherit",
            ),
            (
                "frozen_kv_mtp_cuda_graph_runner",
                "FrozenKVMTPCudaGraphRunner",
                "0.5.12-0.5.13 (read; module absent in 0.5.11); 0.5.14+ inherit",
            ),
        )
    ),
    # -- era C: native export in DecodeCudaGraphRunner's hook --------------------------------------------
    Target(
        _DECODE,
        "DecodeCudaGraphRunner",
        HOOK,
        Strategy.TAKE_OVER_NATIVE,
        versions="0.5.14-0.5.23 (read 0.5.14, 0.5.15, 0.5.23): the hook calls the module-level name "
        f"{NATIVE_EXPORT}(prof_context, runner_name=type(self).__name__, tp_rank=...) in 0.5.14/0.5.15, "
        "(prof_context, runner_name=self._profile_runner_name()) in 0.5.23 (Draft{Name} for a draft "
        "worker's plain decode runner; rank read inside). Subclasses inheriting the hook: EAGLEDraft, "
        "EAGLEDraftExtend, MultiLayerEagleDraftExtend, FrozenKVMTP, UnoDecode (0.5.23), NPU EAGLE variants",
        why="native export fails server start-up on a write error, gzips at level 9 on the calling thread "
        "and names a draft worker's plain runner like the target's before 0.5.23; we take it over (one "
        "file per runner x rank, ours) by wrapping the hook and replacing the module's name for the "
        "native function with a no-op while installed. If the hook references the native export but "
        "not through that module name, the row defers to native (never two files)",
        drop_when="drop when native export is atomic, never fatal and fast (then defer to it)",
        draft_base=True,
    ),
    Target(
        _XPU,
        "XPUGraphRunner",
        HOOK,
        Strategy.OVERRIDE,
        versions="0.5.15-0.5.23 (read 0.5.15, 0.5.23; module absent in 0.5.14): overrides the hook "
        "with XPU tables and no super() call",
        why="the override bypasses DecodeCudaGraphRunner's (exporting) hook",
        drop_when="drop when XPUGraphRunner's override exports or calls super()",
    ),
    Target(
        "sglang.srt.model_executor.npu_graph_runner",
        "NPUGraphRunner",
        HOOK,
        Strategy.OVERRIDE,
        versions="0.5.6 (read): overrides the hook with `pass`; 0.5.5 has the class without the hook",
        why="the `pass` override bypasses CudaGraphRunner's hook",
        drop_when="drop with support for sglang 0.5.6",
    ),
    Target(
        _NPU,
        "NPUGraphRunner",
        HOOK,
        Strategy.OVERRIDE,
        versions="0.5.7-0.5.23 (read each of 0.5.7-0.5.15, 0.5.23): overrides the hook with `pass`",
        why="the `pass` override bypasses the base class's hook (and its native export in 0.5.14+)",
        drop_when="drop when NPUGraphRunner's override exports or calls super()",
    ),
    # -- per-shape segments (the seam for per-batch-size labels) ----------------------------------------
    *_shape_rows(
        "capture_one_batch_size",
        why="label each batch size's capture as a capture::bs=N range inside the one trace",
        drop_when="drop with support for sglang < 0.5.14",
        rows=(
            (_OLD, "CudaGraphRunner", "0.4.10-0.5.13 (read 0.4.10, 0.5.5-0.5.13)"),
            (
                f"{_SPEC}.eagle_draft_cuda_graph_runner",
                "EAGLEDraftCudaGraphRunner",
                "0.4.10-0.5.13 (read 0.4.10, 0.5.5-0.5.13): own method, not super()",
            ),
            (
                f"{_SPEC}.eagle_draft_extend_cuda_graph_runner",
                "EAGLEDraftExtendCudaGraphRunner",
                "0.4.10-0.5.13 (read 0.4.10, 0.5.5-0.5.13): own method, not super()",
            ),
            (
                f"{_SPEC}.multi_layer_eagle_draft_extend_cuda_graph_runner",
                "MultiLayerEagleDraftExtendCudaGraphRunner",
                "0.5.7-0.5.13 (read each)",
            ),
            (f"{_SPEC}.frozen_kv_mtp_cuda_graph_runner", "FrozenKVMTPCudaGraphRunner", "0.5.12-0.5.13 (read)"),
        ),
    ),
    *_shape_rows(
        "capture_one_shape",
        why="label each shape's capture as a capture::bs=N[,variant=..][,stream=..] range",
        drop_when="drop when sglang labels shapes in the single-file trace itself",
        rows=(
            (_DECODE, "DecodeCudaGraphRunner", "0.5.14-0.5.23 (read 0.5.14, 0.5.15, 0.5.23)"),
            (
                f"{_SPEC}.eagle_draft_cuda_graph_runner",
                "EAGLEDraftCudaGraphRunner",
                "0.5.14-0.5.23 (read 0.5.14, 0.5.15, 0.5.23): own override",
            ),
            (
                f"{_SPEC}.eagle_draft_extend_cuda_graph_runner",
                "EAGLEDraftExtendCudaGraphRunner",
                "0.5.14-0.5.23 (read 0.5.14, 0.5.15, 0.5.23): own override",
            ),
            (
                f"{_SPEC}.multi_layer_eagle_draft_extend_cuda_graph_runner",
                "MultiLayerEagleDraftExtendCudaGraphRunner",
                "0.5.14-0.5.23 (read 0.5.14, 0.5.15, 0.5.23)",
            ),
            (
                f"{_SPEC}.frozen_kv_mtp_cuda_graph_runner",
                "FrozenKVMTPCudaGraphRunner",
                "0.5.14-0.5.23 (read 0.5.14, 0.5.15, 0.5.23)",
            ),
            (
                f"{_SPEC}.uno_cuda_graph_runner",
                "UnoDecodeCudaGraphRunner",
                "0.5.23 (read; calls super(), labelled once by the outermost wrapper)",
            ),
        ),
    ),
)


def modules() -> tuple[str, ...]:
    """Target modules in table order, each once."""
    return tuple(dict.fromkeys(t.module for t in TARGETS))
