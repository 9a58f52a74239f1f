"""install / uninstall / ordering / activation logic of ``mixins.sglang_patch`` without real sglang.

Each case runs in a fresh interpreter whose ``sys.path`` starts with a FAKE ``sglang`` package written
to ``tmp_path`` (a few modules named like sglang's, one per era's layout), so these tests run in the main
venv and, shadowing the real package, in the sglang venvs too. The profile export itself is replaced
by a spy (``export_from_runner``), so what is checked is who gets exported, how often, under which name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

FAKE_ERA_A = {
    "sglang/srt/model_executor/cuda_graph_runner.py": '''
        """FAKE era-A layout: profiling inline in capture()."""
        class FakeProfile:
            def __init__(self, *args, **kwargs):
                self.kwargs = kwargs
            def __enter__(self):
                return self
            def __exit__(self, *exc):
                return False
        profile = FakeProfile
        class CudaGraphRunner:
            def capture(self):
                with profile(record_shapes=True) as prof:
                    pass
                return prof
            def capture_one_batch_size(self, bs, forward):
                return bs
    ''',
    "sglang/srt/speculative/eagle_draft_cuda_graph_runner.py": '''
        """FAKE era-A EAGLE runner: a plain class reusing CudaGraphRunner.capture."""
        from sglang.srt.model_executor.cuda_graph_runner import CudaGraphRunner
        class EAGLEDraftCudaGraphRunner:
            def capture(self):
                return CudaGraphRunner.capture(self)
    ''',
}

FAKE_ERA_B = {
    "sglang/srt/model_executor/cuda_graph_runner.py": '''
        """FAKE era-B layout: profiling helpers on CudaGraphRunner, no native export."""
        class CudaGraphRunner:
            def _init_profile_context_and_memory_record(self):
                return "profile-of-" + type(self).__name__
            def _post_process_after_profile(self, prof_context):
                self.tables = prof_context
            def capture(self):
                prof = self._init_profile_context_and_memory_record()
                self._post_process_after_profile(prof)
    ''',
    "sglang/srt/speculative/eagle_draft_cuda_graph_runner.py": '''
        """FAKE era-B EAGLE runner: calls CudaGraphRunner.capture(self) but lacks its helpers."""
        from sglang.srt.model_executor.cuda_graph_runner import CudaGraphRunner
        class EAGLEDraftCudaGraphRunner:
            def capture(self):
                CudaGraphRunner.capture(self)
    ''',
}

FAKE_ERA_C = {
    "sglang/srt/utils/profile_utils.py": '''
        """FAKE native export: records who called it."""
        calls = []
        def export_cuda_graph_capture_trace(prof_context, *, runner_name, tp_rank=None):
            calls.append(runner_name)
    ''',
    "sglang/srt/model_executor/runner/decode_cuda_graph_runner.py": '''
        """FAKE era-C layout: the hook calls the native export through a module-level name."""
        from sglang.srt.utils.profile_utils import export_cuda_graph_capture_trace
        class DecodeCudaGraphRunner:
            def _post_process_after_profile(self, prof_context):
                export_cuda_graph_capture_trace(prof_context, runner_name=type(self).__name__)
            def capture_one_shape(self, size, forward, stream_idx=None, variant_label=None):
                return size
    ''',
    "sglang/srt/speculative/eagle_draft_cuda_graph_runner.py": '''
        """FAKE era-C EAGLE runner: inherits the hook."""
        from sglang.srt.model_executor.runner.decode_cuda_graph_runner import DecodeCudaGraphRunner
        class EAGLEDraftCudaGraphRunner(DecodeCudaGraphRunner):
            pass
    ''',
    "sglang/srt/hardware_backend/xpu/graph_runner/xpu_graph_runner.py": '''
        """FAKE XPU runner: overrides the hook without exporting or calling super()."""
        from sglang.srt.model_executor.runner.decode_cuda_graph_runner import DecodeCudaGraphRunner
        class XPUGraphRunner(DecodeCudaGraphRunner):
            def _post_process_after_profile(self, prof_context):
                self.tables = prof_context
    ''',
}

# Prelude of every case: spy on the export (no torch needed), helpers to describe vars().
PRELUDE = """
import json, logging, sys
logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s")
from mixins import capture_trace, sglang_patch
from mixins.patching import is_wrapped
exported = []
def spy(runner, prof, *, draft_base=None):
    exported.append([type(runner).__name__, str(prof)])
capture_trace.export_from_runner = spy
import mixins.sglang_patch as _sp
def snapshot(cls, names=("capture", "_post_process_after_profile", "_init_profile_context_and_memory_record",
                         "capture_one_shape", "capture_one_batch_size")):
    return {n: (id(vars(cls)[n]), is_wrapped(vars(cls)[n])) if n in vars(cls) else None for n in names}
def out(**values):
    print("RESULT " + json.dumps(values))
"""


def write_fake(root: Path, files: dict[str, str]) -> Path:
    for rel, body in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(body))
        for parent in path.relative_to(root).parents:
            if str(parent) != ".":
                init = root / parent / "__init__.py"
                if not init.exists():
                    init.write_text('"""FAKE sglang package for sglang-capture-trace machinery tests."""\n')
    return root


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_")}
    env.update(extra)
    return env


def run_case(fake: Path | None, body: str, **env: str) -> tuple[dict, str]:
    path = [str(fake)] if fake is not None else []
    code = PRELUDE + textwrap.dedent(body)
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(PYTHONPATH=os.pathsep.join([*path, str(REPO)]), **env),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(li for li in proc.stdout.splitlines() if li.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT ")), proc.stderr


@pytest.fixture
def era_a(tmp_path: Path) -> Path:
    return write_fake(tmp_path, FAKE_ERA_A)


@pytest.fixture
def era_b(tmp_path: Path) -> Path:
    return write_fake(tmp_path, FAKE_ERA_B)


@pytest.fixture
def era_c(tmp_path: Path) -> Path:
    return write_fake(tmp_path, FAKE_ERA_C)


ERA_C_EXERCISE = """
from sglang.srt.utils import profile_utils
from sglang.srt.model_executor.runner.decode_cuda_graph_runner import DecodeCudaGraphRunner as D
from sglang.srt.speculative.eagle_draft_cuda_graph_runner import EAGLEDraftCudaGraphRunner as E
from sglang.srt.hardware_backend.xpu.graph_runner.xpu_graph_runner import XPUGraphRunner as X
def exercise():
    exported.clear(); profile_utils.calls.clear()
    for cls in (D, E, X):
        cls()._post_process_after_profile("prof")
    return {"ours": [e[0] for e in exported], "native": list(profile_utils.calls)}
"""


@pytest.mark.parametrize("order", ["import-then-install", "install-then-import"])
def test_era_c_takes_over_native_export_and_restores(era_c: Path, order: str) -> None:
    body = (
        ("sglang_patch.install()\n" if order == "install-then-import" else "")
        + ERA_C_EXERCISE
        + """
before = None if sglang_patch.is_installed() else {c.__name__: snapshot(c) for c in (D, E, X)}
if not sglang_patch.is_installed():
    sglang_patch.install()
installed = exercise()
sglang_patch.uninstall()
after = {c.__name__: snapshot(c) for c in (D, E, X)}
restored = exercise()
import sglang.srt.model_executor.runner.decode_cuda_graph_runner as m
out(installed=installed, restored=restored, before=before, after=after,
    native_name_restored=m.export_cuda_graph_capture_trace is profile_utils.export_cuda_graph_capture_trace)
"""
    )
    result, _ = run_case(era_c, body)
    names = ["DecodeCudaGraphRunner", "EAGLEDraftCudaGraphRunner", "XPUGraphRunner"]
    assert result["installed"] == {"ours": names, "native": []}
    assert result["restored"] == {"ours": [], "native": names[:2]}
    assert result["native_name_restored"] is True
    assert not any(w for snap in result["after"].values() for v in snap.values() if v for w in [v[1]])
    if result["before"] is not None:
        assert result["after"] == result["before"]


def test_era_c_defers_when_native_export_cannot_be_switched_off(tmp_path: Path) -> None:
    files = dict(FAKE_ERA_C)
    files["sglang/srt/model_executor/runner/decode_cuda_graph_runner.py"] = '''
        """FAKE era-C variant: the hook reaches the native export through a module attribute."""
        from sglang.srt.utils import profile_utils
        class DecodeCudaGraphRunner:
            def _post_process_after_profile(self, prof_context):
                profile_utils.export_cuda_graph_capture_trace(prof_context, runner_name=type(self).__name__)
    '''
    result, stderr = run_case(
        write_fake(tmp_path, files),
        "sglang_patch.install()\n"
        + ERA_C_EXERCISE
        + """
out(run=exercise(), applied=sglang_patch.applied())
""",
    )
    assert result["run"] == {
        "ours": ["XPUGraphRunner"],
        "native": ["DecodeCudaGraphRunner", "EAGLEDraftCudaGraphRunner"],
    }
    assert "deferring to sglang's own export" in stderr


def test_era_b_adopts_helpers_for_eagle_runner(era_b: Path) -> None:
    result, _ = run_case(
        era_b,
        """
from sglang.srt.speculative.eagle_draft_cuda_graph_runner import EAGLEDraftCudaGraphRunner as E
from sglang.srt.model_executor.cuda_graph_runner import CudaGraphRunner as C
try:
    E().capture(); unpatched = "ok"
except AttributeError as exc:
    unpatched = "AttributeError"
before = snapshot(E)
sglang_patch.install()
E().capture(); C().capture()
installed = [e for e in exported]
sglang_patch.uninstall()
out(unpatched=unpatched, installed=installed, restored=snapshot(E) == before, before=before)
""",
    )
    assert result["unpatched"] == "AttributeError"  # the upstream bug under --enable-profile-cuda-graph
    assert result["installed"] == [
        ["EAGLEDraftCudaGraphRunner", "profile-of-EAGLEDraftCudaGraphRunner"],
        ["CudaGraphRunner", "profile-of-CudaGraphRunner"],
    ]
    assert result["restored"] is True
    assert result["before"]["_post_process_after_profile"] is None


def test_era_a_records_inline_profile_scoped_to_the_call(era_a: Path) -> None:
    result, _ = run_case(
        era_a,
        """
import sglang.srt.model_executor.cuda_graph_runner as m
from sglang.srt.speculative.eagle_draft_cuda_graph_runner import EAGLEDraftCudaGraphRunner as E
original = m.profile
sglang_patch.install()
during_install = m.profile is original
prof = E().capture(); m.CudaGraphRunner().capture()
after_call = m.profile is original
sglang_patch.uninstall()
out(exported=[e[0] for e in exported], kwargs=prof.kwargs, during_install=during_install,
    after_call=after_call, restored=not is_wrapped(vars(m.CudaGraphRunner)["capture"]))
""",
        SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE="1",
    )
    assert result["exported"] == ["EAGLEDraftCudaGraphRunner", "CudaGraphRunner"]
    assert result["kwargs"] == {"record_shapes": True}  # sglang's own arguments reach the profiler
    assert result["during_install"] is True and result["after_call"] is True
    assert result["restored"] is True


def test_install_is_idempotent_and_never_imports_sglang(era_c: Path) -> None:
    result, stderr = run_case(
        era_c,
        """
first = sglang_patch.install()
second = sglang_patch.install()
imported_by_install = "sglang" in sys.modules
from sglang.srt.model_executor.runner.decode_cuda_graph_runner import DecodeCudaGraphRunner as D
hook = vars(D)["_post_process_after_profile"]
sglang_patch.uninstall(); sglang_patch.uninstall()
out(first=first, second=second, imported=imported_by_install, depth_one=not is_wrapped(hook.__wrapped__),
    wrapped=is_wrapped(hook), installed=sglang_patch.is_installed())
""",
    )
    assert result["first"] == result["second"] and result["first"]
    assert result["imported"] is False
    assert result["wrapped"] is True and result["depth_one"] is True
    assert result["installed"] is False
    assert "already installed" in stderr


def test_a_failing_patch_never_breaks_the_import(era_c: Path) -> None:
    result, stderr = run_case(
        era_c,
        """
from mixins.sglang_targets import Strategy
def boom(target, cls):
    raise RuntimeError("patch exploded")
sglang_patch._STRATEGIES[Strategy.TAKE_OVER_NATIVE] = boom
sglang_patch.install()
from sglang.srt.model_executor.runner.decode_cuda_graph_runner import DecodeCudaGraphRunner as D
out(imported=D.__name__, applied=sglang_patch.applied())
""",
    )
    assert result["imported"] == "DecodeCudaGraphRunner"
    assert "patch exploded" in stderr
    assert any(name.endswith("DecodeCudaGraphRunner.capture_one_shape") for name in result["applied"])


def test_missing_targets_are_skipped(tmp_path: Path) -> None:
    files = dict(FAKE_ERA_C)
    files["sglang/srt/speculative/frozen_kv_mtp_cuda_graph_runner.py"] = '''
        """FAKE module that exists in this version but has no FrozenKVMTPCudaGraphRunner."""
    '''
    result, stderr = run_case(
        write_fake(tmp_path, files),
        """
import sglang.srt.speculative.frozen_kv_mtp_cuda_graph_runner
import sglang.srt.model_executor.runner.decode_cuda_graph_runner
handled = sglang_patch.install()
out(handled=handled, applied=sglang_patch.applied())
""",
    )
    frozen = "sglang.srt.speculative.frozen_kv_mtp_cuda_graph_runner.FrozenKVMTPCudaGraphRunner"
    assert not any(name.startswith(frozen) for name in result["handled"])
    assert f"skipping {frozen}.capture_one_shape: no class FrozenKVMTPCudaGraphRunner" in stderr
    decode = "sglang.srt.model_executor.runner.decode_cuda_graph_runner.DecodeCudaGraphRunner."
    assert {decode + "_post_process_after_profile", decode + "capture_one_shape"} <= set(result["applied"])
    # modules not imported yet are scheduled, not applied
    assert (
        "sglang.srt.hardware_backend.xpu.graph_runner.xpu_graph_runner.XPUGraphRunner."
        "_post_process_after_profile" in result["handled"]
    )


@pytest.mark.parametrize(
    ("env", "installed"),
    [
        ({}, False),
        ({"SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE": "1"}, True),
        ({"SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE": "bogus"}, False),
    ],
)
def test_register_installs_only_when_switched_on(era_c: Path, env: dict, installed: bool) -> None:
    result, _ = run_case(
        era_c,
        """
sglang_patch.register(); sglang_patch.register()
out(installed=sglang_patch.is_installed())
""",
        **env,
    )
    assert result["installed"] is installed
