"""FAKE era-B EAGLE runner: calls CudaGraphRunner.capture(self) but lacks its helpers."""
from sglang.srt.model_executor.cuda_graph_runner import CudaGraphRunner


class EAGLEDraftCudaGraphRunner:
    def capture(self):
        CudaGraphRunner.capture(self)
