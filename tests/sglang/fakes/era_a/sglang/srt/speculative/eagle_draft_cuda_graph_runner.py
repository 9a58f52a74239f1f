"""FAKE era-A EAGLE runner: a plain class reusing CudaGraphRunner.capture."""
from sglang.srt.model_executor.cuda_graph_runner import CudaGraphRunner


class EAGLEDraftCudaGraphRunner:
    def capture(self):
        return CudaGraphRunner.capture(self)
