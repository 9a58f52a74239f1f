"""The FAKE sglang packages in ``fakes/`` and how to run a fresh interpreter on one (shared by the
machinery and doctor tests)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
FAKES = HERE / "fakes"

DECODE = "sglang.srt.model_executor.runner.decode_cuda_graph_runner.DecodeCudaGraphRunner"
XPU = "sglang.srt.hardware_backend.xpu.graph_runner.xpu_graph_runner.XPUGraphRunner"
EAGLE = "sglang.srt.speculative.eagle_draft_cuda_graph_runner.EAGLEDraftCudaGraphRunner"
ERA_C_NAMES = ["DecodeCudaGraphRunner", "EAGLEDraftCudaGraphRunner", "XPUGraphRunner"]
#: The rows the era-C fake has the shape for; every other row of its modules is skipped.
ERA_C_APPLIED = {
    f"{DECODE}._post_process_after_profile",
    f"{DECODE}.capture_one_shape",
    f"{XPU}._post_process_after_profile",
}
ERA_C_MODULES = {name.rsplit(".", 2)[0] for name in ERA_C_APPLIED} | {EAGLE.rsplit(".", 1)[0]}


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_")}
    env.update(extra)
    return env


def run_python(fake: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` with one fake's ``sglang``, this directory and the repository on the path, no SGLANG_*
    but ``env``, and the start-up hook off (an installed .pth would otherwise install at start-up)."""
    env.setdefault("SGLANG_CAPTURE_TRACE_STARTUP_HOOK", "0")
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120,
                          env=clean_env(PYTHONPATH=os.pathsep.join([str(fake), str(HERE), str(REPO)]), **env))


def run_child(fake: Path, case: str, *args: str, **env: str) -> tuple[dict[str, Any], str]:
    """Run one case of ``machinery_child.py``: its result and its log."""
    proc = run_python(fake, "-m", "machinery_child", case, *args, **env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(li for li in proc.stdout.splitlines() if li.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT ")), proc.stderr


def fake_with(tmp_path: Path, era: str, replacements: dict[str, str]) -> Path:
    """A copy of one era's fake with some modules replaced by files from ``fakes/variants``."""
    root = tmp_path / era
    shutil.copytree(FAKES / era, root)
    for module, variant in replacements.items():
        path = root / (module.replace(".", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(FAKES / "variants" / variant, path)
    return root
