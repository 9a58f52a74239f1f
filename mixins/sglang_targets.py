"""Everything this package knows about sglang: the patch table — what is patched, how, why, where it applies,
when to drop it — and the sglang names the rest of the package reads. No code compares versions: the version
fields are evidence (docs/DESIGN.md §5). Modelled on vllm-ascend's patch notes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from mixins.formats import BS, SEGMENT_PREFIX, TOKENS, VARIANT, label_text

# -- names sglang defines that we rely on -----------------------------------------------------------------

#: The runner's post-profile hook, ``_post_process_after_profile(prof_context)`` (0.5.6+).
HOOK = "_post_process_after_profile"
#: The helper that creates the capture profiler (0.5.6+); era-B EAGLE runners lack it.
INIT = "_init_profile_context_and_memory_record"
#: sglang's own export (0.5.14+), a module-level name in the decode runner's module.
NATIVE_EXPORT = "export_cuda_graph_capture_trace"
#: Per-shape capture methods, newest first: ``capture_one_shape(size, forward, ...)`` (0.5.14+),
#: ``capture_one_batch_size(bs, forward)`` (0.4.10-0.5.13).
SHAPE_METHODS = ("capture_one_shape", "capture_one_batch_size")
#: Short label names for per-shape arguments that distinguish captures of one size (read from the
#: wheels: ``stream_idx`` and ``variant_label`` from 0.5.14, ``attention_variant`` from 0.5.20).
#: Any other scalar argument with a non-default value is labelled under its own name.
SHAPE_LABEL_NAMES = {"variant_label": VARIANT, "stream_idx": "stream", "attention_variant": "attention"}

#: sglang's ``--enable-profile-cuda-graph`` and where each release keeps it, in the order read (docs/DESIGN.md §5.1).
PROFILE_FLAG = "enable_profile_cuda_graph"
EXEC_CONFIG = ("get_exec", "graph")
SERVER_ARGS_OWNERS: tuple[tuple[str, ...], ...] = (("model_runner", "server_args"), ("eagle_worker", "server_args"))
GLOBAL_SERVER_ARGS = ("sglang.srt.server_args", "get_global_server_args")
#: Names whose use on a runner's capture path means sglang profiles that capture itself (the decode
#: runners' helpers and hook, ``torch.profiler.profile``, sglang's export): a PROFILE_CAPTURE row then
#: defers to sglang (never two profilers, never two files).
NATIVE_PROFILE_NAMES = ("profile", "ProfilerActivity", INIT, HOOK, NATIVE_EXPORT)

#: Rank sources, read only when sglang already imported them: ``get_parallel()`` (0.5.14+; the
#: native export reads its tp_rank from 0.5.16) ...
RUNTIME_CONTEXT = "sglang.srt.runtime_context"
#: ... and the older parallel state (every version read), with its getter per value.
PARALLEL_STATE = "sglang.srt.distributed.parallel_state"
PARALLEL_STATE_GETTERS = {
    "tp_rank": "get_tensor_model_parallel_rank",
    "pp_rank": "get_pipeline_model_parallel_rank",
    "pp_size": "get_pipeline_model_parallel_world_size",
    "tp_size": "get_tensor_model_parallel_world_size",
}
#: Where a runner keeps ranks and group sizes, as paths of attributes from the runner (docs/DESIGN.md §1.1;
#: ``model_runner.ps`` is 0.5.20's frozen ``ParallelState``).
RUNNER_OWNERS: tuple[tuple[str, ...], ...] = ((), ("model_runner",), ("model_runner", "ps"))
RUNNER_SIZE_OWNERS: tuple[tuple[str, ...], ...] = RUNNER_OWNERS + (("model_runner", "server_args"),)
#: Data-parallel replicas: the replica's rank and size, and the two signs of DP attention, whose "DP ranks"
#: are attention groups of one TP group, not replicas (docs/DESIGN.md §1.1).
DP_RANK = "dp_rank"
DP_SIZE = "dp_size"
ATTENTION_DP_SIZE = "attn_dp_size"
ATTENTION_DP_FLAG = "enable_dp_attention"

#: sglang's plugin loader (0.5.13+): its module, the entry-point group, our entry point's name, the allow-list.
PLUGIN_LOADER = "sglang.srt.plugins"
PLUGIN_GROUP = "sglang.srt.plugins"
# Our entry point's name is defined once, in the module the start-up bootstrap reads (docs/DESIGN.md §4).
from _sglang_capture_trace_switches import PLUGIN_NAME as PLUGIN_NAME  # noqa: E402

# -- versions ------------------------------------------------------------------------------------------------

#: sglang releases this table speaks about, in order (post releases are read as their base version).
RELEASES: tuple[str, ...] = ("0.4.10", *(f"0.5.{minor}" for minor in range(1, 24)))
#: The releases whose venvs run tests/sglang in CI (``.ci/Makefile``'s SGLANG_VERSIONS).
CI_RELEASES = ("0.5.5", "0.5.13", "0.5.20", "0.5.23")


def span(first: str, last: str) -> tuple[str, ...]:
    """The releases from ``first`` to ``last`` inclusive, e.g. ``span("0.5.6", "0.5.13")``."""
    start, stop = RELEASES.index(first), RELEASES.index(last)
    if start > stop:
        raise ValueError(f"span({first!r}, {last!r}): {first} comes after {last}")
    return RELEASES[start : stop + 1]


class Strategy(str, Enum):
    """How a row is applied (see ``mixins.sglang_patch``). Every strategy but ADOPT_HOOK wraps one
    method with one of our wrappers; what differs is the wrapper and what else the row changes."""

    #: Export the profile the method (the hook, or a subclass override of it that never exports,
    #: as XPU's and NPU's ``pass``) was given, after it returns.
    EXPORT_AFTER_HOOK = "export_after_hook"
    #: Also replace the hook module's name for sglang's native export with a no-op while installed.
    TAKE_OVER_NATIVE = "take_over_native"
    #: Profiling inline in ``capture()``: record the ``torch.profiler.profile`` the call creates
    #: (through its module's own ``profile`` name) and export it after the call.
    INLINE_CAPTURE = "inline_capture"
    #: Label each shape's capture as a ``record_function`` range.
    LABEL_SHAPES = "label_shapes"
    #: The class calls ``<base>.capture(self)`` but lacks the profiling helpers that method calls:
    #: give it delegating helpers so profiling works, export through the base's wrapped hook.
    ADOPT_HOOK = "adopt_hook"
    #: sglang never profiles this runner's capture: when ``--enable-profile-cuda-graph`` is on for the
    #: process (and our switch), run the method inside a ``torch.profiler.profile`` we own and export
    #: after it returns. Defers when the capture path uses any of ``NATIVE_PROFILE_NAMES``.
    PROFILE_CAPTURE = "profile_capture"
    #: The runner has no capture(): it captures one graph lazily per new input shape while serving. Run
    #: each such capture inside our profiler (as PROFILE_CAPTURE), labelled per shape, and re-publish the
    #: runner's one file with every shape so far (``mixins.lazy_trace``, docs/DESIGN.md §5.1).
    PROFILE_LAZY_CAPTURE = "profile_lazy_capture"


@dataclass(frozen=True)
class Target:
    """One patch.

    Applicability (checked on the real class): ``requires``: methods the class must have (own or
    inherited); ``absent``: methods it must not have; ``own``: the method must be in the class's own
    body; ``code_names``: names the code of ``code_of`` (default: ``method``) must reference; ``base``
    (ADOPT_HOOK): the module global naming the class whose ``base_requires`` helpers are delegated to.
    ``draft_base``: name a draft worker's exact instances ``Draft{Name}``. ``unit`` (LABEL_SHAPES):
    what the size argument counts (``SHAPE_UNITS``). ``capture_path`` (PROFILE_CAPTURE): the methods
    whose code is searched for ``NATIVE_PROFILE_NAMES`` (those the class has). ``profile_flag``
    (PROFILE_CAPTURE / PROFILE_LAZY_CAPTURE): the runtime has sglang's ``--enable-profile-cuda-graph``;
    False for the diffusion runtime (``sglang.multimodal_gen``), which has no such flag: our switch alone
    opts in there. ``limits``: what the row's trace cannot hold here, said by ``status()`` (and so by
    ``capture-trace doctor``) beside "profiled by us". ``optional``: what the module's imports need beyond
    an LLM server's packages (torch_npu; the diffusion runtime's dependencies): where a module it imports
    is missing, doctor says the row is skipped for that, not "cannot tell".

    Evidence: ``read_in``: releases whose wheel was read and where the row applies; ``verified_in``:
    the subset run in CI (``ci``: the CI venvs that can import the row's module), where the test suite
    checks the row really applies; ``evidence``: what the wheels showed. ``note``: the row's effect for the
    README table.
    """

    module: str
    cls: str
    method: str
    strategy: Strategy
    why: str
    drop_when: str
    note: str
    read_in: tuple[str, ...]
    ci: tuple[str, ...] = CI_RELEASES
    evidence: str = ""
    requires: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()
    own: bool = True
    code_names: tuple[str, ...] = ()
    code_of: str | None = None
    base: str | None = None
    base_requires: tuple[str, ...] = ()
    draft_base: bool = False
    unit: str = BS
    capture_path: tuple[str, ...] = ()
    shape_of: Callable[[Mapping[str, Any]], tuple[tuple[str, int], ...]] | None = None
    graphs: str | None = None
    profile_flag: bool = True
    limits: str = ""
    optional: str = ""

    @property
    def verified_in(self) -> tuple[str, ...]:
        return tuple(v for v in self.read_in if v in self.ci)

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.cls}.{self.method}"


_OLD = "sglang.srt.model_executor.cuda_graph_runner"
_DECODE = "sglang.srt.model_executor.runner.decode_cuda_graph_runner"
_SPEC = "sglang.srt.speculative"

_CPU = "sglang.srt.model_executor.cpu_graph_runner"
_PIECEWISE = "sglang.srt.model_executor.piecewise_cuda_graph_runner"
_PREFILL = "sglang.srt.model_executor.runner.prefill_cuda_graph_runner"
_BREAKABLE = "sglang.srt.model_executor.breakable_cuda_graph_runner"
_VLA = "sglang.multimodal_gen.runtime.vla.cuda_graph"

_EAGLE = f"{_SPEC}.eagle_draft_cuda_graph_runner"
_EAGLE_EXTEND = f"{_SPEC}.eagle_draft_extend_cuda_graph_runner"
_MULTI_LAYER = f"{_SPEC}.multi_layer_eagle_draft_extend_cuda_graph_runner"
_FROZEN = f"{_SPEC}.frozen_kv_mtp_cuda_graph_runner"

_ERA_A, _ERA_B, _ERA_C = span("0.4.10", "0.5.5"), span("0.5.6", "0.5.13"), span("0.5.14", "0.5.23")

#: Releases where each never-profiled runner exists with a capture() (read from every wheel).
_CPU_RELEASES = span("0.5.2", "0.5.23")
_PIECEWISE_RELEASES = span("0.5.4", "0.5.13")
_PREFILL_RELEASES = span("0.5.14", "0.5.23")
#: ... and each never-profiled runner without a capture(), whose row is on the method that captures.
_BREAKABLE_RELEASES = span("0.5.11", "0.5.13")
_ONE_GRAPH_RELEASES = span("0.5.16", "0.5.23")
#: ... and the diffusion runtime's graphs (``sglang.multimodal_gen``).
_VLA_RELEASES = span("0.5.18", "0.5.23")
#: The CI venvs that import the diffusion runtime: 0.5.20's lacks its dependencies (imageio).
_DIFFUSION_CI = ("0.5.23",)

_NO_NATIVE = "drop when the oldest supported sglang exports natively (0.5.14+) and native export is deferred to"


def _adopt_row(module: str, cls: str, read_in: tuple[str, ...], evidence: str) -> Target:
    return Target(
        module, cls, HOOK, Strategy.ADOPT_HOOK,
        why="plain class whose capture() calls CudaGraphRunner.capture(self), which calls "
        f"self.{INIT}() and self.{HOOK}(prof): the class lacks both, so upstream raises "
        "AttributeError under --enable-profile-cuda-graph. Delegating helpers make profiling work "
        "and route the export through CudaGraphRunner's wrapped hook under this class's name",
        drop_when="drop with support for sglang < 0.5.14 (from 0.5.14 these subclass "
        "DecodeCudaGraphRunner and inherit the hook)",
        note="sglang crashes here with --enable-profile-cuda-graph; we add the two missing helpers "
        "(delegating to CudaGraphRunner) and export",
        read_in=read_in, evidence=evidence,
        # applies where the class calls CudaGraphRunner.capture(self) and has neither helper itself
        absent=(INIT, HOOK), own=False, requires=("capture",), code_names=("CudaGraphRunner",), code_of="capture",
        base="CudaGraphRunner", base_requires=(INIT, HOOK),
    )


_PROFILE_WHY = (
    "sglang never profiles this runner's capture, with or without --enable-profile-cuda-graph "
    "(the flag is read by the decode runners only), so no trace exists for it"
)


_PROFILE_DROP = "drop when sglang profiles this runner's capture itself (the row then defers: never two files)"


def _profile_row(
    module: str, cls: str, read_in: tuple[str, ...], evidence: str, *, method: str = "capture",
    path: tuple[str, ...] = (), why: str = _PROFILE_WHY, note: str = "",
) -> Target:
    """A runner whose capture sglang never profiles: PROFILE_CAPTURE on ``method``, the method that does
    the whole capture (``capture()`` for most; ``path``: the methods it calls on the way to each shape,
    searched for sglang's own profiling). ``note`` is added to the standard one."""
    return Target(
        module, cls, method, Strategy.PROFILE_CAPTURE, why=why, drop_when=_PROFILE_DROP,
        note=f"`{method}()` run inside our own profiler (CPU + device activity, record_shapes) when "
        f"--enable-profile-cuda-graph is on; exported after it returns{f'; {note}' if note else ''}",
        read_in=read_in, evidence=evidence, capture_path=path,
    )


# -- the vision encoders' lazy captures: one shape per call, labelled from the call's own arguments ---------
# Read from every wheel (0.5.7-0.5.23). ``tokens`` is the sequence length the graph was captured for.


def _rows(tensor: Any) -> int:
    return int(tensor.shape[0])


def _vit_shape(args: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """``ViTCudaGraphRunner.create_graph(x_3d [S, 1, H], cu_seqlens [images + 1], ...)``."""
    return ((TOKENS, _rows(args["x_3d"])), ("images", _rows(args["cu_seqlens"]) - 1))


def _intern_vit_shape(args: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """``InternViTCudaGraphRunner.create_graph(x [tiles, S, H])``: graphs are keyed by (tiles, S)."""
    tiles, seq = (int(n) for n in args["x"].shape[:2])
    return ((TOKENS, tiles * seq), ("tiles", tiles))


def _kimi_vit_shape(args: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """``KimiK3ViTCudaGraphRunner._capture(key, pixel_values [patches, ...], grid_thws, grid_thw_list, ...)``:
    graphs are keyed by the images' (t, h, w) grids."""
    return ((TOKENS, _rows(args["pixel_values"])), ("images", len(args["grid_thw_list"])))


def _row_bucket_shape(args: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """``RowBucketGraphRunner._capture(rows, num_rows, static, ...)``: one graph per row bucket (token rows)."""
    return ((TOKENS, int(args["rows"])),)


def _dspark_shape(args: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """``DsparkSamplingAcceptGraph._capture(key, region)``: ``key[0]`` is the verify graph's batch size (the
    rest are buffer addresses)."""
    return ((BS, int(args["key"][0])),)


def _diffusion_shape(args: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """``BaseBreakableCudaGraphRunner._capture(kwargs, key)``: the DiT's call, keyed by every tensor's shape.
    Labelled from the latents ``hidden_states`` — video ``[B, C, F, H, W]``, image ``[B, C, H, W]``,
    packed ``[B, tokens, D]`` — and the prompt bucket (``encoder_hidden_states [B, S, D]``)."""
    kwargs = args["kwargs"]
    dims = [int(n) for n in kwargs["hidden_states"].shape]
    names = {5: (BS, "", "frames", "height", "width"), 4: (BS, "", "height", "width"), 3: (BS, TOKENS, "")}
    parts = [(name, n) for name, n in zip(names[len(dims)], dims, strict=True) if name]
    prompt = kwargs.get("encoder_hidden_states")
    if len(getattr(prompt, "shape", ())) >= 2:
        parts.append(("prompt_tokens", int(prompt.shape[1])))
    return tuple(parts)


def _vla_prefix_shape(args: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """``VLAPrefixGraphRunner._capture(signature, step_fn, inputs)``, keyed by the signature: its one
    caller (pi05's ``encode_prefix``) passes ``(*images, *image_masks, tokens, token_masks)`` with the
    image count first in ``static_layout``."""
    signature = args["signature"]
    return ((BS, int(signature.batch_size)), (TOKENS, int(signature.input_shapes[-1][-1])),
            ("images", int(signature.static_layout[0])))


def _vla_denoise_shape(args: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """``VLADenoiseGraphRunner._capture(signature, ...)``: one action-denoise step (every step replays it),
    keyed by batch, prefix length and the action chunk."""
    signature = args["signature"]
    return ((BS, int(signature.batch_size)), ("prefix_tokens", int(signature.prefix_len)),
            ("horizon", int(signature.action_horizon)), ("action_dim", int(signature.action_dim)))


def _vla_tensor_shape(args: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
    """``VLATensorGraphRunner._capture(fn, inputs)``: a function of tensors keyed by their shapes (and the
    caller's ``key``): how many inputs and their elements in all."""
    inputs = args["inputs"]
    return (("inputs", len(inputs)), ("elements", sum(int(t.numel()) for t in inputs)))


_LAZY_WHY = (
    "sglang never profiles this runner: it has no capture() and captures one CUDA graph lazily per new "
    "input shape while serving (--enable-profile-cuda-graph is never read for it)"
)
#: The diffusion runtime (``sglang.multimodal_gen``, its own server and server args) has no
#: ``--enable-profile-cuda-graph``: our switch is the only opt-in its rows can read.
_DIFFUSION_WHY = (
    "sglang never profiles this runner: the diffusion runtime has no --enable-profile-cuda-graph and no "
    "profiler on this capture path; it captures one graph lazily per new input signature"
)
_LAZY_NOTE = (
    "each lazy capture run inside our own profiler when {when}, labelled `{label}`; the one file is "
    "re-published with every shape so far (bounded)"
)
_FLAG_ON = "--enable-profile-cuda-graph is on"
_SWITCH_ALONE = "our switch is on (this runtime has no --enable-profile-cuda-graph)"
_DIFFUSION_DEPS = "the diffusion runtime's dependencies (imageio, diffusers, ...)"
_SWITCH_ALONE_LIMITS = "on whenever our switch is: the diffusion runtime has no --enable-profile-cuda-graph"


def _lazy_row(
    module: str, cls: str, method: str, read_in: tuple[str, ...], evidence: str, *,
    shape_of: Callable[[Mapping[str, Any]], tuple[tuple[str, int], ...]], path: tuple[str, ...] = (),
    graphs: str | None = None, unit: str = TOKENS, label: tuple[tuple[str, str], ...] = (), own: bool = True,
    profile_flag: bool = True, note: str = "", ci: tuple[str, ...] = CI_RELEASES, limits: str = "",
    optional: str = "",
) -> Target:
    """A PROFILE_LAZY_CAPTURE row. ``label``: the segment label's fields the note shows, as (name, placeholder) (default
    ``{unit}=N,…``); ``note`` is added to the standard one."""
    standard = _LAZY_NOTE.format(when=_FLAG_ON if profile_flag else _SWITCH_ALONE,
                                 label=SEGMENT_PREFIX + (label_text(label) if label else f"{unit}=N,…"))
    return Target(
        module, cls, method, Strategy.PROFILE_LAZY_CAPTURE, why=_LAZY_WHY if profile_flag else _DIFFUSION_WHY,
        drop_when=_PROFILE_DROP, note=standard + (f"; {note}" if note else ""), read_in=read_in, ci=ci,
        evidence=evidence, own=own, capture_path=path, shape_of=shape_of, graphs=graphs, unit=unit,
        profile_flag=profile_flag, limits=limits, optional=optional,
    )


def _diffusion_row(module: str, cls: str, read_in: tuple[str, ...], evidence: str, **fields: Any) -> Target:
    """A lazy ``_capture`` of the diffusion runtime: no --enable-profile-cuda-graph (our switch alone opts in),
    dependencies of its own, batch-first shapes; run in the CI venvs that import it."""
    return _lazy_row(module, cls, "_capture", read_in, evidence, unit=BS, profile_flag=False, ci=_DIFFUSION_CI,
                     limits=_SWITCH_ALONE_LIMITS, optional=_DIFFUSION_DEPS, **fields)


def _shape_rows(
    method: str, *, why: str, rows: tuple[tuple[str, str, tuple[str, ...], str], ...], unit: str = BS,
    drop_when: str = _PROFILE_DROP,
) -> list[Target]:
    """Per-shape methods (one strategy, one reason) for several classes: (module, class, read_in, evidence);
    by default inside a runner we profile."""
    return [
        Target(
            module, cls, method, Strategy.LABEL_SHAPES, why, drop_when,
            note=f"`{method}` labelled per call (`{SEGMENT_PREFIX}{unit}=N`)", read_in=read_in, evidence=evidence,
            unit=unit,
        )
        for module, cls, read_in, evidence in rows
    ]


TARGETS: tuple[Target, ...] = (
    # -- era A: profiling inline in CudaGraphRunner.capture() ------------------------------------------
    Target(
        _OLD, "CudaGraphRunner", "capture", Strategy.INLINE_CAPTURE,
        why="no hook and no export: the profile only feeds key_averages tables. EAGLEDraftCudaGraphRunner "
        "and EAGLEDraftExtendCudaGraphRunner (plain classes) call CudaGraphRunner.capture(self), so this "
        "wrapper sees them as the instance and names their files after their own class",
        drop_when="drop with support for sglang < 0.5.6",
        note="`capture()` wrapped: the profile it creates inline is recorded during that call only, then "
        "exported; EAGLE draft runners are covered through `CudaGraphRunner.capture(self)` under their own name",
        read_in=_ERA_A,
        evidence="inline `profile(...)` in capture(), `from torch.profiler import profile`; 0.5.6-0.5.13 use "
        "the hook instead (row skipped: class has the hook); module gone in 0.5.14+",
        absent=(HOOK,),
        code_names=("profile",),
        draft_base=True,
    ),
    # -- era B: hook on CudaGraphRunner, no native export ------------------------------------------------
    Target(
        _OLD, "CudaGraphRunner", HOOK, Strategy.EXPORT_AFTER_HOOK,
        why="the hook logs key_averages and a memory snapshot but never writes a trace",
        drop_when=_NO_NATIVE,
        note="hook wrapped: export after it returns",
        read_in=_ERA_B,
        evidence="absent in 0.4.10-0.5.5; module gone in 0.5.14+",
        draft_base=True,
    ),
    _adopt_row(_EAGLE, "EAGLEDraftCudaGraphRunner", _ERA_B, "0.4.10-0.5.5 covered by the inline-capture row"),
    _adopt_row(
        _EAGLE_EXTEND, "EAGLEDraftExtendCudaGraphRunner", _ERA_B, "0.4.10-0.5.5 covered by the inline-capture row"
    ),
    _adopt_row(_MULTI_LAYER, "MultiLayerEagleDraftExtendCudaGraphRunner", span("0.5.7", "0.5.13"),
               "module absent in 0.5.6"),
    _adopt_row(_FROZEN, "FrozenKVMTPCudaGraphRunner", span("0.5.12", "0.5.13"), "module absent in 0.5.11"),
    # -- era C: native export in DecodeCudaGraphRunner's hook --------------------------------------------
    Target(
        _DECODE, "DecodeCudaGraphRunner", HOOK, Strategy.TAKE_OVER_NATIVE,
        why="native export fails server start-up on a write error, gzips at level 9 on the calling thread "
        "and names a draft worker's plain runner like the target's before 0.5.22; we take it over (one "
        "file per runner x rank, ours) by wrapping the hook and replacing the module's name for the "
        "native function with a no-op while installed. If the hook references the native export but "
        "not through that module name, the row defers to native (never two files)",
        drop_when="drop when native export is atomic, never fatal and fast (then defer to it)",
        note="native export taken over (one file, ours); a draft worker's plain runner gets `Draft…`. "
        "Subclasses inheriting the hook are covered: EAGLEDraft, EAGLEDraftExtend, MultiLayerEagleDraftExtend "
        "(per-step graphs, SGLANG_ENABLE_SINGLE_CG_DRAFT=0; the default single-graph path is the "
        "OneGraphMultiLayerEagle… row), FrozenKVMTP, UnoDecode (0.5.20+), NPU EAGLE variants",
        read_in=_ERA_C,
        evidence=f"the hook calls the module-level name {NATIVE_EXPORT}(prof_context, ...) with "
        "runner_name=type(self).__name__, tp_rank=get_tensor_model_parallel_rank() in 0.5.14-0.5.15; "
        "runner_name=type(self).__name__, tp_rank=get_parallel().tp_rank in 0.5.16-0.5.20; "
        "runner_name=type(self).__name__ only in 0.5.21; runner_name=self._profile_runner_name() "
        "(Draft{Name} for a draft worker's plain runner) in 0.5.22-0.5.23",
        draft_base=True,
    ),
    Target(
        "sglang.srt.hardware_backend.xpu.graph_runner.xpu_graph_runner", "XPUGraphRunner", HOOK,
        Strategy.EXPORT_AFTER_HOOK,
        why="overrides the hook with XPU tables and no super() call, bypassing DecodeCudaGraphRunner's "
        "(exporting) hook",
        drop_when="drop when XPUGraphRunner's override exports or calls super()",
        note="override wrapped: export after it returns",
        read_in=span("0.5.15", "0.5.23"),
        evidence="module absent in 0.5.14",
    ),
    Target(
        "sglang.srt.model_executor.npu_graph_runner", "NPUGraphRunner", HOOK, Strategy.EXPORT_AFTER_HOOK,
        why="overrides the hook with `pass`, bypassing CudaGraphRunner's hook",
        drop_when="drop with support for sglang 0.5.6",
        note="`pass` override wrapped: export after it returns",
        read_in=("0.5.6",),
        evidence="0.5.5 has the class without the hook; the module moved in 0.5.7",
    ),
    Target(
        "sglang.srt.hardware_backend.npu.graph_runner.npu_graph_runner", "NPUGraphRunner", HOOK,
        Strategy.EXPORT_AFTER_HOOK,
        why="overrides the hook with `pass`, bypassing the base class's hook (and its native export in 0.5.14+)",
        drop_when="drop when NPUGraphRunner's override exports or calls super()",
        note="`pass` override wrapped: export after it returns (profiling needs torch_npu: not run in CI)",
        read_in=span("0.5.7", "0.5.23"),
    ),
    # -- per-shape segments (the seam for per-batch-size labels) ----------------------------------------
    *_shape_rows(
        "capture_one_batch_size",
        why="label each batch size's capture as a capture::bs=N range inside the one trace",
        drop_when="drop with support for sglang < 0.5.14",
        rows=(
            (_OLD, "CudaGraphRunner", (*_ERA_A, *_ERA_B), "capture_one_batch_size(self, bs, forward)"),
            (_EAGLE, "EAGLEDraftCudaGraphRunner", (*_ERA_A, *_ERA_B), "own method, not super()"),
            (_EAGLE_EXTEND, "EAGLEDraftExtendCudaGraphRunner", (*_ERA_A, *_ERA_B), "own method, not super()"),
            (_MULTI_LAYER, "MultiLayerEagleDraftExtendCudaGraphRunner", span("0.5.7", "0.5.13"), ""),
            (_FROZEN, "FrozenKVMTPCudaGraphRunner", span("0.5.12", "0.5.13"), ""),
        ),
    ),
    *_shape_rows(
        "capture_one_shape",
        why="label each shape's capture as a capture::bs=N[,variant=..][,stream=..][,attention=..] range",
        drop_when="drop when sglang labels shapes in the single-file trace itself",
        rows=(
            (
                _DECODE, "DecodeCudaGraphRunner", _ERA_C,
                "(size, forward, stream_idx=None, variant_label=None); attention_variant=None from 0.5.20",
            ),
            (_EAGLE, "EAGLEDraftCudaGraphRunner", _ERA_C, "own override"),
            (_EAGLE_EXTEND, "EAGLEDraftExtendCudaGraphRunner", _ERA_C, "own override"),
            (
                _MULTI_LAYER, "MultiLayerEagleDraftExtendCudaGraphRunner", _ERA_C,
                "per-step graphs only (SGLANG_ENABLE_SINGLE_CG_DRAFT=0); the single-graph runner (0.5.16+) "
                "never calls it",
            ),
            (_FROZEN, "FrozenKVMTPCudaGraphRunner", _ERA_C, ""),
            (f"{_SPEC}.uno_cuda_graph_runner", "UnoDecodeCudaGraphRunner", span("0.5.20", "0.5.23"),
             "calls super(): labelled once, outermost"),
        ),
    ),
    # -- runners sglang never profiles: our own profiler around capture() ---------------------------------
    _profile_row(
        _CPU, "CPUGraphRunner", _CPU_RELEASES,
        "stores enable_profile_cuda_graph in __init__ (model_runner.server_args <= 0.5.13, "
        "get_exec().graph from 0.5.14) and never reads it; capture() torch.compiles the model per batch size",
        path=("_capture",),
    ),
    _profile_row(
        _PIECEWISE, "PiecewiseCudaGraphRunner", _PIECEWISE_RELEASES,
        "capture() loops capture_one_batch_size(num_tokens); no profiler anywhere in the module; "
        "replaced by PrefillCudaGraphRunner",
    ),
    _profile_row(
        _PREFILL, "PrefillCudaGraphRunner", _PREFILL_RELEASES,
        "capture() -> _capture() -> _capture_one_stream() loops capture_one_shape(num_tokens) and, with "
        "chunked-prefix capture, capture_one_shape(num_tokens, prefix_num_chunks=n); no profiler",
        path=("_capture", "_capture_one_stream"),
    ),
    *_shape_rows(
        "capture_one_batch_size",
        why="label each batch size's capture as a capture::bs=N range inside our profile",
        rows=((_CPU, "CPUGraphRunner", _CPU_RELEASES,
               "(bs, forward) <= 0.5.5; (bs, forward, skip_cross_attention=False) later, called with True"),),
    ),
    *_shape_rows(
        "capture_one_batch_size",
        why="label each token count's capture as a capture::tokens=N range inside our profile",
        rows=((_PIECEWISE, "PiecewiseCudaGraphRunner", _PIECEWISE_RELEASES, "(num_tokens)"),),
        unit=TOKENS,
    ),
    *_shape_rows(
        "capture_one_shape",
        why="label each token count's capture as a capture::tokens=N[,prefix_num_chunks=K] range",
        rows=((_PREFILL, "PrefillCudaGraphRunner", _PREFILL_RELEASES, "(size, *, prefix_num_chunks=0)"),),
        unit=TOKENS,
    ),
    # -- runners sglang never profiles, without a capture(): our profiler around the method that captures --
    _profile_row(
        _BREAKABLE, "BreakableCudaGraphRunner", _BREAKABLE_RELEASES,
        "ModelRunner builds it instead of PiecewiseCudaGraphRunner under --enable-breakable-cuda-graph; no "
        "capture(): __init__ warms up, then _capture_all() loops reversed(capture_num_tokens) calling "
        "_capture_one(num_tokens, pool, stream) (warm-up runs, BreakableCUDAGraphCapture); no profiler in "
        "the module; module absent in 0.5.10, and from 0.5.14 breakable capture is a runner backend "
        "(runner_backend.breakable_cuda_graph_backend) under the prefill / decode runners' rows",
        method="_capture_all",
        path=("_capture_one",),
        note="used instead of PiecewiseCudaGraphRunner with --enable-breakable-cuda-graph",
    ),
    *_shape_rows(
        "_capture_one",
        why="label each token count's capture as a capture::tokens=N range inside our profile",
        rows=((_BREAKABLE, "BreakableCudaGraphRunner", _BREAKABLE_RELEASES, "(num_tokens, pool, stream)"),),
        unit=TOKENS,
    ),
    _profile_row(
        _MULTI_LAYER, "OneGraphMultiLayerEagleMultiStepDraftExtendCudaGraphRunner", _ONE_GRAPH_RELEASES,
        "the multi-layer EAGLE worker builds it when SGLANG_ENABLE_SINGLE_CG_DRAFT (EnvBool(True)) is on and "
        "the draft-extend backend supports it; a plain class (base MultiLayerEagleMultiStepDraftExtend"
        "CudaGraphRunner, no profiling helpers) whose __init__ calls _init_and_capture(), overridden to "
        "create the per-step MultiLayerEagleDraftExtendCudaGraphRunner objects without capturing them and "
        "loop reversed(capture_bs) calling _capture_one_graph(bs, runners) -> backend.capture_one(...) (all "
        "steps' forwards in one graph); the per-step runners' capture() and profiling hook are never called; "
        "module has no profiler; class absent in 0.5.15",
        method="_init_and_capture",
        path=("_capture_one_graph",),
        why="the multi-layer EAGLE draft-extend runner sglang builds by default captures every step in one "
        "graph per batch size without calling the per-step runners' capture() or profiling hook, so "
        "--enable-profile-cuda-graph profiles nothing and no trace exists for it",
        note="multi-layer EAGLE draft extend's default single-graph path (SGLANG_ENABLE_SINGLE_CG_DRAFT)",
    ),
    *_shape_rows(
        "_capture_one_graph",
        why="label each batch size's capture (all draft steps in one graph) as a capture::bs=N range inside "
        "our profile",
        rows=(
            (
                _MULTI_LAYER, "OneGraphMultiLayerEagleMultiStepDraftExtendCudaGraphRunner", _ONE_GRAPH_RELEASES,
                "(bs, runners)",
            ),
        ),
    ),
    # -- vision encoders: no capture(), one lazy capture per new input shape while serving ---------------
    _lazy_row(
        "sglang.srt.multimodal.vit_cuda_graph_runner", "ViTCudaGraphRunner", "create_graph", span("0.5.7", "0.5.23"),
        "run() calls create_graph(x_3d, cu_seqlens, cu_window_seqlens, position_embeddings, ...) for a new "
        "graph key (seq_len <= 0.5.18; (seq_len, attention layout) from 0.5.19, attention_layout_key=None "
        "added), which returns early for a known key, else allocates and calls _create_graph (warm-up, "
        "torch.cuda.graph); used by Qwen2.5-VL / Qwen3-VL under SGLANG_VIT_ENABLE_CUDA_GRAPH; module absent "
        "in 0.5.6",
        shape_of=_vit_shape,
        path=("_create_graph",),
        graphs="block_graphs",
    ),
    _lazy_row(
        "sglang.srt.multimodal.internvl_vit_cuda_graph_runner", "InternViTCudaGraphRunner", "create_graph",
        span("0.5.8", "0.5.23"),
        "run(x) calls create_graph(x [tiles, S, H]) for a new (tiles, S), which returns early for a known "
        "key, else _warmup_once then _capture_graph (torch.cuda.graph); module absent in 0.5.7",
        shape_of=_intern_vit_shape,
        path=("_warmup_once", "_capture_graph"),
        graphs="graphs",
    ),
    _lazy_row(
        "sglang.srt.multimodal.kimi_k3_vit_cuda_graph_runner", "KimiK3ViTCudaGraphRunner", "_capture",
        span("0.5.17", "0.5.23"),
        "run() calls _capture(key, pixel_values, grid_thws, grid_thw_list, metadata) for a new grid key seen "
        "min_hits times while under capacity (SGLANG_KIMI_K3_VIT_CUDA_GRAPH_*), stores the entry itself, "
        "and falls back to eager when _capture raises; module absent in 0.5.16",
        shape_of=_kimi_vit_shape,
    ),
    # -- other lazy captures of the LLM runtime --------------------------------------------------------------
    _lazy_row(
        "sglang.srt.model_executor.runner.row_bucket_graph_runner", "RowBucketGraphRunner", "_capture",
        ("0.5.23",),
        "a plain class (DeepSeek-V4's replay tail builds one); run() captures, on first use of a (rows, key), "
        "every bucket from max_rows down to it, each through _capture(rows, num_rows, static, forward_batch, "
        "body, batch_scope, *, global_num_rows=None) -> _record (two eager warm-ups, BreakableCUDAGraphCapture "
        "into the global graph pool); run() stores the graph _capture returns; no profiler in the module",
        shape_of=_row_bucket_shape,
        path=("_record",),
    ),
    _lazy_row(
        f"{_SPEC}.dspark_components.dspark_sampling_accept_graph", "DsparkSamplingAcceptGraph", "_capture",
        ("0.5.23",),
        "DSpark's static verify (SGLANG_OPT_DSV41_SAMPLING_ACCEPT_GRAPH) builds one; run() routes an all-sampled "
        "step to _run(key, region), key = (verify batch size, buffer addresses): the first step of a key runs "
        "eagerly, the second calls _capture(key, region) (graph_capture(), torch.cuda.graph into its own "
        "pool), which stores the graph in _graphs, or on failure disables the graph and returns None; at most "
        "MAX_GRAPHS (32) keys; no profiler in the module; module imports the scheduler's stack (setproctitle, "
        "fastapi, uvicorn); absent from the 0.5.22 wheel",
        shape_of=_dspark_shape,
        graphs="_graphs",
        unit=BS,
        label=((BS, "N"),),
        note="DSpark speculative decoding's sampling-accept region, one graph per verify batch size",
    ),
    # -- the NPU vision encoder: the ViT row's lazy capture, overridden -----------------------------------------
    _lazy_row(
        "sglang.srt.hardware_backend.npu.graph_runner.vit_npu_graph_runner", "ViTNpuGraphRunner", "create_graph",
        span("0.5.10", "0.5.23"),
        "subclass of ViTCudaGraphRunner overriding create_graph(x_3d, cu_seqlens, rotary_pos_emb_cos, "
        "rotary_pos_emb_sin; attention_layout_key added by 0.5.20) without super(), so the ViT row never sees "
        "it: returns early for a known key, else allocates and, given the rotary tables, _create_graph "
        "(torch_npu.npu.graph, block_graphs[key]); the module imports torch_npu at module level; module "
        "absent in 0.5.8",
        shape_of=_vit_shape,
        graphs="block_graphs",
        path=("_create_graph",),
        label=((TOKENS, "N"), ("images", "K")),
        note="CPU-side ops and ranges only: torch.profiler records no NPU activity (that takes torch_npu's own "
        "profiler); needs torch_npu: not run in CI",
        ci=(),
        limits="CPU-side ops and ranges only: torch.profiler records no NPU kernels (torch_npu's profiler does)",
        optional="torch_npu (an Ascend NPU build of torch)",
    ),
    # -- the diffusion runtime (sglang.multimodal_gen): no --enable-profile-cuda-graph, our switch opts in ----
    _diffusion_row(
        "sglang.multimodal_gen.runtime.breakable_cuda_graph.runner", "DiffusionBreakableCudaGraphRunner",
        span("0.5.16", "0.5.23"),
        "the denoising stage builds one per DiT (and quality level) under --enable-breakable-cuda-graph; at "
        "warm-up it calls capture(**kwargs) once per prompt bucket (and __call__ captures an unseen "
        "signature while forward_batch.is_warmup), which returns early for a known or blocked signature, else "
        "_capture(kwargs, key) (inherited from BaseBreakableCudaGraphRunner: two eager warm-ups, "
        "BreakableCUDAGraphCapture) whose entry capture() stores; a capture over SGLANG_DIFFUSION_BCG_MAX_SEGMENTS "
        "raises; the diffusion runtime has no --enable-profile-cuda-graph and no profiler here; module absent "
        "in 0.5.14",
        shape_of=_diffusion_shape,
        own=False,
        label=((BS, "B"), ("frames", "F"), ("height", "H"), ("width", "W"), ("prompt_tokens", "S")),
        note="labelled from the latents (video; `bs,height,width` for images, `bs,tokens` packed) and the "
        "prompt bucket",
    ),
    _diffusion_row(
        _VLA, "VLAPrefixGraphRunner", _VLA_RELEASES,
        "pi05's encode_prefix calls capture_or_run(signature, encode, inputs) (batch 1 only), which captures "
        "through _capture(signature, step_fn, inputs) (one eager warm-up, torch.cuda.graph into the global "
        "pool) for an uncached signature the bounded cache admits, and stores the entry itself; module absent "
        "in 0.5.17",
        shape_of=_vla_prefix_shape,
        label=((BS, "B"), (TOKENS, "T"), ("images", "K")),
        note="pi0.5's prefix encoding (images + prompt tokens)",
    ),
    _diffusion_row(
        _VLA, "VLADenoiseGraphRunner", _VLA_RELEASES,
        "pi05's denoise_step calls capture_or_run(signature, step_fn, prefix_context, x_t, timestep) for each "
        "action-denoise step; one graph per VLADenoiseGraphSignature (batch, prefix length, action horizon x "
        "dim, dtype, layout) captured through _capture (one eager warm-up, torch.cuda.graph), every later step "
        "replays it (prefix_full_attention joins the signature by 0.5.20)",
        shape_of=_vla_denoise_shape,
        label=((BS, "B"), ("prefix_tokens", "P"), ("horizon", "H"), ("action_dim", "D")),
        note="one action-denoise step per signature (the later steps replay it)",
    ),
    _diffusion_row(
        _VLA, "VLATensorGraphRunner", span("0.5.22", "0.5.23"),
        "FLUX 3 action's observation encoder and denoise loop each build one (named \"FLUX 3 observation\" / "
        "\"FLUX 3 denoise\"); run(fn, inputs, key=) captures through _capture(fn, inputs) for a new (key, input "
        "shapes and dtypes), evicting the oldest past max_entries; class absent in 0.5.20-0.5.21",
        shape_of=_vla_tensor_shape,
        label=(("inputs", "K"), ("elements", "N")),
        note="FLUX 3 action's graphs (both instances in one file)",
    ),
)


def modules() -> tuple[str, ...]:
    """Target modules in table order, each once."""
    return tuple(dict.fromkeys(t.module for t in TARGETS))
