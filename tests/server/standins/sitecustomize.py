"""TEST STAND-IN: on PYTHONPATH of the real sglang server tests/server launches, never installed. Python runs it
at start-up in every process of the server (its scheduler and detokenizer are started with multiprocessing's
spawn and inherit PYTHONPATH). It fills two gaps of a CPU-only machine, each with a post-import hook, so
nothing is imported at start-up (tests/sglang's ``cpu_shims`` imports the same stand-ins, without the hooks):

1. torchvision: PyPI's build is linked against CUDA torch; on CPU torch its import dies with
   ``operator torchvision::nms does not exist``, and sglang imports it. Defining the two operator schemas
   it attaches fakes to, once torch is imported, lets it import.
2. sglang's ``TorchNativeAttnBackend`` lacks the three CPU-graph hooks that ``CPUGraphRunner`` calls and
   only the Intel AMX backend has (which needs a real ``sgl_kernel``; see ``sgl_kernel/__init__.py``). They
   are added when that module is imported, each only if sglang does not define it:
   ``init_cpu_graph_state`` (nothing to set up), ``get_cpu_graph_seq_len_fill_value`` (1, as the AMX
   backend) and ``init_forward_metadata_capture_cpu_graph`` (the torch_native backend keeps no per-batch
   metadata; it clears the SWA write location as its own ``init_forward_metadata`` does without SWA).
"""

from __future__ import annotations

from typing import Any

import wrapt

TORCH_NATIVE = "sglang.srt.layers.attention.torch_native_backend"
_torchvision_library: Any = None  # must stay alive: dropping it unregisters the operators


def define_torchvision_ops(torch: Any) -> None:
    global _torchvision_library
    if _torchvision_library is not None:
        return
    library = torch.library.Library("torchvision", "DEF")
    library.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    library.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _torchvision_library = library


def init_cpu_graph_state(self: Any, max_bs: int, max_num_tokens: int) -> None:
    pass


def get_cpu_graph_seq_len_fill_value(self: Any) -> int:
    return 1


def init_forward_metadata_capture_cpu_graph(self: Any, *args: Any, **kwargs: Any) -> None:
    # 0.5.23 passes (bs, num_tokens, req_pool_indices, seq_lens, out_cache_loc, encoder_lens, forward_mode,
    # spec_info); older releases, where tests/sglang runs the CPU graph runner too, pass fewer
    self.swa_out_cache_loc = None


def _add_cpu_graph_hooks(module: Any) -> None:
    cls = module.TorchNativeAttnBackend
    for hook in (init_cpu_graph_state, get_cpu_graph_seq_len_fill_value, init_forward_metadata_capture_cpu_graph):
        if not hasattr(cls, hook.__name__):
            setattr(cls, hook.__name__, hook)


if __name__ == "sitecustomize":  # at the server's start-up, not when tests/sglang imports the stand-ins
    wrapt.register_post_import_hook(define_torchvision_ops, "torch")
    wrapt.register_post_import_hook(_add_cpu_graph_hooks, TORCH_NATIVE)
