#!/usr/bin/env bash
# The GPU check of `capture-trace attribute` (docs/DESIGN.md §9), prepared so that a session lent a
# GPU spends its few device minutes on one call: capture real CUDA graphs with the demo, profile 3
# replays of each, attribute the replay to the captures, check every graph kernel is attributed and
# verified, check the decorator's profile mode (the demo's prefill runner) captured real CUDA graphs
# in its capture::tokens= segments, check the memory snapshot sglang's hook dumps lands beside the trace
# and reads back (`memory`, torch's viewer), and bring the traces back as test fixtures with their provenance.
#
#   bash scripts/gpu_check.sh --prepare   # here, once: fetch the wheels the device lacks into .whl/
#   bash scripts/gpu_check.sh             # there (device run, carry .whl), writes into $OUT
#   GPU_CHECK_DEVICE=cpu bash scripts/gpu_check.sh   # dry run of every step that needs no GPU
#
# Device run: run(command="bash scripts/gpu_check.sh", carry=[".whl"], timeout_s=480). Files come
# back under $OUT (at most 8, all used): the four capture traces, replay-TP-0.json.gz, attribute.json,
# provenance.txt, check.log. The device has torch, wrapt and rich but not msgspec (KINDS.md).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$(mktemp -d)}
device=${GPU_CHECK_DEVICE:-cuda}
wheels="$repo/.whl"

if [ "${1:-}" = "--prepare" ]; then
    grep -qxF "/.whl/" "$repo/.git/info/exclude" 2>/dev/null || echo "/.whl/" >> "$repo/.git/info/exclude"
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$wheels" "msgspec==0.23.0"
    ls -l "$wheels"
    exit 0
fi

check() {
export PYTHONUNBUFFERED=1 SGLANG_CAPTURE_TRACE_STARTUP_HOOK=0
if ! python3 -c "import msgspec" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$wheels"/*.whl
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"

{
    date -u +"date: %Y-%m-%dT%H:%M:%SZ"
    python3 -c "import platform, torch; print('python', platform.python_version(), '| torch', torch.__version__, \
'| cuda', torch.version.cuda, '| gpu', torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)"
    command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
    git -C "$repo" rev-parse HEAD 2>/dev/null | sed 's/^/commit: /' || true
} | tee "$out/provenance.txt"

demo=$(mktemp -d)
if [ "$device" = "cuda" ]; then
    timeout 300 python3 -m mixins demo --device cuda --replay 3 --out "$demo"
    traces="$demo/graph_capture_profile"
    replay="$traces/replay-TP-0.json.gz"
    captures="$traces"
else  # dry run: the demo on CPU (no graphs, so no replay), attribute on the real ROCm pair instead
    timeout 300 python3 -m mixins demo --device cpu --out "$demo"
    traces="$demo/graph_capture_profile"
    replay="$repo/tests/data/vllm_decode_full_graph_replay_rank_0.json.gz"
    captures="$repo/tests/data/vllm_decode_full_graph_capture_rank_0.json.gz"
fi
python3 -m mixins ls "$traces"
python3 -m mixins time "$traces"
python3 -m mixins attribute --top 10 "$replay" "$captures"
python3 -m mixins attribute --json "$replay" "$captures" > "$out/attribute.json"
cp "$traces"/*.json.gz "$out/"

# profile mode (the demo's PrefillCudaGraphRunner profiles nothing itself): our profiler around its
# capture() recorded one capture::tokens= segment per token count, each with a capture window on CUDA
python3 -m mixins time --json "$traces/cuda_graph_capture-PrefillCudaGraphRunner-TP-0.json.gz" \
    | python3 -c "
import json, sys
(t,) = json.load(sys.stdin)['traces']
segs = t['segments']
print('profile mode:', [(s['label'], s['capture_windows']) for s in segs])
assert segs and all(s['label'].startswith('tokens=') for s in segs), segs
assert '$device' != 'cuda' or all(s['capture_windows'] >= 1 for s in segs), 'no CUDA graph captured in profile mode'
"

# memory snapshot: a hook shaped like sglang's decode hook dumps the allocator's history of a real CUDA graph
# capture to the relative name sglang uses; ours must land beside the trace (not in the cwd), read back
# without unpickling objects (`memory`), show graph-pool memory inside the capture::bs= segments, and open
# in torch's own viewer
mem=$(mktemp -d)
(cd "$mem" && SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE=1 SGLANG_TORCH_PROFILER_DIR="$mem/out" \
    SGLANG_CAPTURE_TRACE_BACKGROUND=0 SGLANG_CAPTURE_TRACE_STRICT=1 python3 - "$device" <<'EOF'
import sys, torch
from mixins import with_capture_trace
if sys.argv[1] != "cuda":
    print("memory snapshot: needs CUDA (dry run: skipped)")
    raise SystemExit(0)

@with_capture_trace
class SnapshotRunner:
    def capture(self):
        torch.cuda.memory._record_memory_history()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                torch.profiler.ProfilerActivity.CUDA]) as prof:
            for bs in (4, 1):
                self.capture_one_batch_size(bs, None)
        self._post_process_after_profile(prof)

    def capture_one_batch_size(self, bs, forward):
        x = torch.ones(bs, 1024, device="cuda")
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = (x @ x.T).relu()
        self.keep = getattr(self, "keep", []) + [(graph, y)]

    def _post_process_after_profile(self, prof_context):
        torch.cuda.memory._dump_snapshot("cuda_graph_runner_memory_usage.pickle")
        torch.cuda.memory._record_memory_history(enabled=None)

SnapshotRunner().capture()
EOF
)
if [ "$device" = "cuda" ]; then
    test ! -e "$mem/cuda_graph_runner_memory_usage.pickle"
    snap="$mem/out/graph_capture_profile/cuda_graph_memory-SnapshotRunner-TP-0.pickle"
    python3 -m mixins memory "$mem/out"
    python3 -m mixins memory --json "$mem/out" | python3 -c "
import json, sys
(s,) = json.load(sys.stdin)['snapshots']
print('memory snapshot:', s['trace_events'], 'events;', [(x['label'], x['allocs'], x['graph_pool_bytes']) for x in s['shapes']])
assert s['trace_events'] > 0 and len(s['shapes']) == 2, s
assert all(x['graph_pool_bytes'] > 0 for x in s['shapes']), 'no graph-pool allocation inside a capture segment'
"
    python3 -m torch.cuda._memory_viz trace_plot "$snap" -o "$mem/trace_plot.html"
    test -s "$mem/trace_plot.html"
    echo "memory snapshot: ok"
fi

python3 - "$out/attribute.json" <<'EOF'
import json, sys
res = json.load(open(sys.argv[1]))
cov = res["coverage"]
graph = [op for op in res["ops"] if op["source"] == "graph"]
print(f"graph kernels {cov['graph_kernels_attributed']}/{cov['graph_kernels']} attributed, "
      f"GPU time {cov['attributed_us']:.1f}/{cov['gpu_time_us']:.1f} us, {len(graph)} graph rows")
assert cov["graph_kernels"] > 0, "no graph kernels in the replay"
assert cov["graph_kernels_attributed"] == cov["graph_kernels"], res["unattributed"]
assert all(op["verified"] for op in graph)
print("GPU CHECK PASSED")
EOF
}

check 2>&1 | tee "$out/check.log"  # pipefail: the check's status; the log is complete when tee exits
