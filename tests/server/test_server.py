"""The whole mission end to end in a real sglang 0.5.23 server on this CPU machine: the product as a user runs it.

A real ``python -m sglang.launch_server`` (HTTP server, tokenizer manager, scheduler, model runner,
``CPUGraphRunner`` capturing with torch.compile/inductor) serves a tiny random Llama made on disk, with our
package installed into its venv by pip (``.ci/sglang_server_venv.sh``) and nothing imported by hand: the
``.pth`` start-up hook and sglang's plugin loader are the only way our code gets in. Two TEST STAND-INS
cover what cannot exist on this machine, on the server's PYTHONPATH only (``standins/``): an import-only
``sgl_kernel`` and the three CPU-graph hooks ``TorchNativeAttnBackend`` lacks (plus torchvision's two
operator schemas). Two server starts per run, each a module-scoped fixture: the switch on, the switch off.

Marker ``server``: not in the README's default command (a cold start compiles with inductor for minutes);
``.ci/run`` runs it, and so does ``python -m pytest -m server tests/server``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytestmark = pytest.mark.server

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
STANDINS = HERE / "standins"
ENABLE = "SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE"
RUNNER = "CPUGraphRunner"
TRACE = f"cuda_graph_capture-{RUNNER}-TP-0.json.gz"
CPU_GRAPH_ROW = f"sglang.srt.model_executor.cpu_graph_runner.{RUNNER}"

# What the server's own log says, read line by line through a pipe: the handshakes the test waits on.
READY = "The server is fired up and ready to roll"
SAVED = "CUDA graph capture trace saved to: "  # mixins/export.py, at INFO through sglang's logging
PROFILER_START = "] profiler_start"  # Kineto (torch 2.13) logs this to stderr whenever a profiler starts
START_TIMEOUT_S = 900  # a cold inductor compile on 2 busy cores; the wait ends at once if the server dies
STOP_GRACE_S = 60  # SIGTERM to the group, then SIGKILL
PROMPT = "The quick brown fox"
NEW_TOKENS = 8


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without anything that steers Python, sglang or us, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "PYTHON", "HF_", "TRANSFORMERS_"))}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def venv() -> Path:
    """The server venv, built once and cached (.ci/venv_lib.sh), with this checkout pip-installed into it."""
    done = subprocess.run(["bash", str(REPO / ".ci" / "sglang_server_venv.sh")], capture_output=True, text=True,
                          timeout=3600, env=clean_env())
    assert done.returncode == 0, done.stderr[-4000:]
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("server")


@pytest.fixture(scope="module")
def model(venv: Path, work: Path) -> Path:
    """Made in the server venv with the server's environment (transformers imports torchvision too)."""
    out = work / "tiny-llama"
    done = subprocess.run([str(venv / "bin" / "python"), str(HERE / "make_model.py"), str(out)], capture_output=True,
                          text=True, timeout=600, env=server_env(work, "make-model", "0"))
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def server_env(work: Path, name: str, switch: str) -> dict[str, str]:
    """What the server runs with: the stand-ins on PYTHONPATH, a fresh sglang cache and profiler directory
    per start, one inductor cache per test run (the second start reuses the first one's compiled code)."""
    run_dir = work / name
    return clean_env(
        PYTHONPATH=str(STANDINS),
        SGLANG_USE_CPU_ENGINE="1",
        SGLANG_CACHE_DIR=str(run_dir / "sglang-cache"),
        SGLANG_TORCH_PROFILER_DIR=str(run_dir / "profile"),
        TORCHINDUCTOR_CACHE_DIR=str(work / "inductor-cache"),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        **{ENABLE: switch},
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Log:
    """The server's merged stdout/stderr, read by one thread; an Event per awaited line, set on EOF too."""

    path: Path
    lines: list[str] = field(default_factory=list)
    waiting: dict[str, threading.Event] = field(default_factory=dict)
    closed: threading.Event = field(default_factory=threading.Event)

    def expect(self, *needles: str) -> None:
        for needle in needles:
            self.waiting[needle] = threading.Event()

    def read(self, stream: Iterator[str]) -> None:
        with open(self.path, "w") as copy:
            for line in stream:
                copy.write(line)
                copy.flush()
                self.lines.append(line)
                for needle, event in self.waiting.items():
                    if needle in line:
                        event.set()
        self.closed.set()
        for event in self.waiting.values():
            event.set()

    def wait(self, needle: str, timeout: float) -> str:
        """The first line holding ``needle``; fails with the log's tail if the server exits or time runs out."""
        self.waiting[needle].wait(timeout)
        found = [line for line in self.lines if needle in line]
        assert found, f"no {needle!r} in the server log ({self.path}):\n{self.tail()}"
        return found[0]

    def tail(self, n: int = 60) -> str:
        return "".join(self.lines[-n:])


@dataclass
class ServerRun:
    """One start of the real server: what it said, what it answered, and how long each part took."""

    env: dict[str, str]
    profile_dir: Path
    log: Log
    health: int = 0
    generated: dict = field(default_factory=dict)
    startup_s: float = 0.0
    stop_s: float = 0.0
    saved_line: str | None = None


def run_server(venv: Path, model: Path, work: Path, name: str, switch: str) -> ServerRun:
    """Launch, wait for the ready line (and, with the switch on, our saved line), check /health, one
    /generate, stop the process group."""
    env = server_env(work, name, switch)
    port = free_port()
    command = [
        str(venv / "bin" / "python"), "-m", "sglang.launch_server", "--model-path", str(model), "--device", "cpu",
        "--host", "127.0.0.1", "--port", str(port), "--enable-torch-compile", "--cuda-graph-bs-decode", "1",
        "--torch-compile-max-bs", "1", "--max-total-tokens", "4096", "--enable-profile-cuda-graph",
        "--decode-log-interval", "1",  # every decode step logs whether it replayed the CPU graph
    ]
    run = ServerRun(env, Path(env["SGLANG_TORCH_PROFILER_DIR"]), Log(work / f"{name}.log"))
    run.log.expect(READY, SAVED)
    started = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            cwd=work, start_new_session=True)  # its own process group, killed as one
    assert proc.stdout is not None
    reader = threading.Thread(target=run.log.read, args=(proc.stdout,), daemon=True)
    reader.start()
    try:
        run.log.wait(READY, START_TIMEOUT_S)
        run.startup_s = time.monotonic() - started
        if switch == "1":  # the export finishes in a background thread of the scheduler: its log line
            run.saved_line = run.log.wait(SAVED, START_TIMEOUT_S)
        base = f"http://127.0.0.1:{port}"
        with urllib.request.urlopen(f"{base}/health", timeout=60) as response:
            run.health = response.status
        body = {"text": PROMPT, "sampling_params": {"max_new_tokens": NEW_TOKENS, "temperature": 0, "ignore_eos": True}}
        request = urllib.request.Request(f"{base}/generate", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            run.generated = json.load(response)
    finally:
        stopping = time.monotonic()
        stop(proc, run.log)
        run.stop_s = time.monotonic() - stopping
        reader.join(STOP_GRACE_S)
    print(f"\n{name}: ready after {run.startup_s:.1f} s, stopped in {run.stop_s:.1f} s (log {run.log.path})")
    return run


def stop(proc: subprocess.Popen, log: Log) -> None:
    """SIGTERM to the whole group; the pipe closing (every process holding it has exited) is the handshake.
    SIGKILL to the group if that does not happen within the grace period."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    if not log.closed.wait(STOP_GRACE_S):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(STOP_GRACE_S)


@pytest.fixture(scope="module")
def switch_on(venv: Path, model: Path, work: Path) -> ServerRun:
    return run_server(venv, model, work, "switch-on", "1")


@pytest.fixture(scope="module")
def switch_off(venv: Path, model: Path, work: Path, switch_on: ServerRun) -> ServerRun:
    return run_server(venv, model, work, "switch-off", "0")  # after switch_on: the inductor cache is warm


def capture_trace(venv: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The ``capture-trace`` command pip installed into the server venv."""
    return subprocess.run([str(venv / "bin" / "capture-trace"), *args], capture_output=True, text=True, timeout=600,
                          env=env if env is not None else clean_env())


def all_files(directory: Path) -> list[str]:
    return sorted(str(p.relative_to(directory)) for p in directory.rglob("*")) if directory.exists() else []


# -- the server really ran and served ------------------------------------------------------------------


@pytest.mark.parametrize("which", ["switch_on", "switch_off"])
def test_the_real_server_captures_cpu_graphs_and_serves(request: pytest.FixtureRequest, which: str) -> None:
    run: ServerRun = request.getfixturevalue(which)
    assert run.health == 200
    assert run.generated["meta_info"]["completion_tokens"] == NEW_TOKENS, run.generated
    decodes = [line for line in run.log.lines if "Decode batch" in line]
    assert decodes and all("cpu graph: True" in line for line in decodes), run.log.tail()  # replays of the capture


def test_the_trace_does_not_change_what_the_server_answers(switch_on: ServerRun, switch_off: ServerRun) -> None:
    assert switch_on.generated["text"] == switch_off.generated["text"]


# -- switch on: exactly one trace, named for the runner, that the analyzer reads -----------------------


def test_switch_on_writes_exactly_one_cpu_graph_runner_trace(switch_on: ServerRun) -> None:
    assert all_files(switch_on.profile_dir) == ["graph_capture_profile", f"graph_capture_profile/{TRACE}"]
    assert switch_on.saved_line is not None and switch_on.saved_line.rstrip().endswith(TRACE)
    assert sum(PROFILER_START in line for line in switch_on.log.lines) == 1  # ours, around the capture


def test_summary_time_and_check_read_the_per_shape_segments(venv: Path, switch_on: ServerRun) -> None:
    trace = switch_on.profile_dir / "graph_capture_profile" / TRACE
    summary = capture_trace(venv, "summary", "--json", str(trace))
    assert summary.returncode == 0, summary.stderr
    (record,) = json.loads(summary.stdout)["traces"]
    assert (record["runner"], record["tp_rank"]) == (RUNNER, 0)
    assert record["segment_source"] == "capture::"  # our per-shape ranges, not the whole file as one
    shapes = [s for s in record["segments"] if s["bs"] is not None]  # "(outside)": the profiler's own few events
    assert [s["bs"] for s in shapes] == [1], record["segments"]  # --cuda-graph-bs-decode 1
    assert shapes[0]["label"].split(",")[0] == "bs=1" and shapes[0]["cpu_ops"] > 0, shapes[0]
    assert shapes[0]["events"] > 0.99 * record["events"]  # the capture is inside its shape's range
    timed = capture_trace(venv, "time", "--json", str(trace))
    assert timed.returncode == 0, timed.stderr
    (timing,) = json.loads(timed.stdout)["traces"]
    assert timing["runner"] == RUNNER and [s["label"] for s in timing["segments"]] == [shapes[0]["label"]], timing
    checked = capture_trace(venv, "check", str(trace.parent))
    assert checked.returncode == 0, checked.stdout + checked.stderr


# -- switch off: nothing at all ------------------------------------------------------------------------


def test_switch_off_writes_no_trace_at_all(switch_off: ServerRun) -> None:
    assert all_files(switch_off.profile_dir) == []
    assert not any(SAVED in line or PROFILER_START in line for line in switch_off.log.lines)  # no profiler either


# -- doctor, run in that venv with the server's environment, tells the truth --------------------------


def test_doctor_with_the_switch_on_says_the_cpu_graph_runner_is_patched(venv: Path, work: Path) -> None:
    done = capture_trace(venv, "doctor", env=server_env(work, "doctor-on", "1"))
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line.strip() for line in done.stdout.splitlines() if f".{RUNNER}." in line]
    assert rows == [
        f"{CPU_GRAPH_ROW}.capture: applied (profiled by us: sglang does not profile this capture)",
        f"{CPU_GRAPH_ROW}.capture_one_batch_size: applied",
    ], done.stdout
    assert "live routes: plugin, .pth" in done.stdout
    assert "no problem found" in done.stdout


def test_doctor_with_the_switch_off_names_the_switch(venv: Path, work: Path) -> None:
    done = capture_trace(venv, "doctor", "--no-import", env=server_env(work, "doctor-off", "0"))
    assert done.returncode == 1
    assert f"problem: {ENABLE} is '0': set it to 1" in done.stdout, done.stdout


def test_stand_ins_say_what_they_are(venv: Path, work: Path) -> None:
    """The stand-ins are on the server's path only, and a call into the fake kernel package fails loudly."""
    code = "import sgl_kernel\ntry:\n    sgl_kernel.silu_and_mul()\nexcept RuntimeError as exc:\n    print(exc)\n"
    done = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True, timeout=300,
                          env=server_env(work, "stand-ins", "0"))
    assert done.returncode == 0, done.stderr
    message = "sgl_kernel.silu_and_mul called: this is the sgl_kernel test stand-in, which has no kernels"
    assert done.stdout.strip() == message
    bare = subprocess.run([str(venv / "bin" / "python"), "-c", "import sgl_kernel"], capture_output=True, text=True,
                          timeout=300, env=clean_env())
    assert bare.returncode != 0 and "No module named 'sgl_kernel'" in bare.stderr
