"""FAKE XPU runner: overrides the hook without exporting or calling super()."""
from sglang.srt.model_executor.runner.decode_cuda_graph_runner import DecodeCudaGraphRunner


class XPUGraphRunner(DecodeCudaGraphRunner):
    def _post_process_after_profile(self, prof_context):
        self.tables = prof_context
