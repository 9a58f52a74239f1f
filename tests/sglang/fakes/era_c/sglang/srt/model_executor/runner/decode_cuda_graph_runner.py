"""FAKE era-C layout: the hook calls the native export through a module-level name."""
from sglang.srt.utils.profile_utils import export_cuda_graph_capture_trace


class DecodeCudaGraphRunner:
    def _post_process_after_profile(self, prof_context):
        export_cuda_graph_capture_trace(prof_context, runner_name=type(self).__name__)

    def capture_one_shape(self, size, forward, stream_idx=None, variant_label=None, attention_variant=None):
        return size
