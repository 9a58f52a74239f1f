"""FAKE native export: records who called it."""
calls = []


def export_cuda_graph_capture_trace(prof_context, *, runner_name, tp_rank=None):
    calls.append(runner_name)
