"""FAKE era-C EAGLE runner: inherits the hook."""
from sglang.srt.model_executor.runner.decode_cuda_graph_runner import DecodeCudaGraphRunner


class EAGLEDraftCudaGraphRunner(DecodeCudaGraphRunner):
    pass
