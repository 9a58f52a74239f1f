"""FAKE era-C variant: the hook reaches the native export through a module attribute."""
from sglang.srt.utils import profile_utils


class DecodeCudaGraphRunner:
    def _post_process_after_profile(self, prof_context):
        profile_utils.export_cuda_graph_capture_trace(prof_context, runner_name=type(self).__name__)
