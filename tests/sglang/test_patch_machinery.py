"""install / uninstall / status / ordering / activation of ``mixins.sglang_patch`` without real sglang.

Each case runs in a fresh interpreter (``python -m machinery_child CASE``, bodies in
``machinery_child.py``) whose ``sys.path`` starts with a FAKE ``sglang`` package from ``fakes/`` (a
few modules named like sglang's, one per era's layout), so these tests run in the main venv and,
shadowing the real package, in the sglang venvs too. The orders of import / install / plugin load /
uninstall are generated (every sequence of up to three activation steps, with the import at every
position) and checked against a model of what must hold after each: ``DEFAULT_ORDERS`` by default, all 142
under the ``exhaustive`` marker (``.ci/run`` runs them).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from fake_sglang import (
    DECODE,
    ERA_C_APPLIED,
    ERA_C_MODULES,
    ERA_C_NAMES,
    FAKES,
    XPU,
    fake_with,
    run_child,
)
from orders import DEFAULT_ORDERS, expected_states, installed_after, orders

# -- the generated ordering matrix ---------------------------------------------------------------------

def era_c_applies(qualname: str) -> str | None:
    """Rows of the era-C fake's modules apply where it has their shape; other modules do not exist."""
    if qualname.rsplit(".", 2)[0] not in ERA_C_MODULES:
        return None
    return "applied" if qualname in ERA_C_APPLIED else "skipped"


@pytest.fixture(scope="module")
def pristine() -> dict[str, Any]:
    result, _ = run_child(FAKES / "era_c", "matrix", "import")
    return result["final"]


@pytest.mark.skipif(
    importlib.util.find_spec("sglang") is not None,
    reason="FAKE sglang only (all 142 orders with -m exhaustive); sglang venvs run REAL_ORDERS on the real one",
)
@pytest.mark.parametrize(
    "steps",
    [pytest.param(s, marks=[] if s in DEFAULT_ORDERS else [pytest.mark.exhaustive]) for s in orders(3)],
    ids="-".join,
)
def test_order(steps: tuple[str, ...], pristine: dict[str, Any]) -> None:
    """Whatever the order: status tells the truth after every step, never double-wrapped, exactly one
    export per runner (ours while installed, sglang's otherwise), uninstall restores ``vars()`` exactly."""
    result, _ = run_child(FAKES / "era_c", "matrix", *steps, SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE="1")
    for done, states in enumerate(result["after_each"], start=1):
        assert states == expected_states(steps[:done], list(states), era_c_applies), steps[:done]
    if installed_after(steps):
        assert set(result["applied"]) == ERA_C_APPLIED
        wrapped = [v for snap in result["end"].values() for v in snap.values() if v.startswith("wrapped")]
        assert len(wrapped) == 3 and all(v.startswith("wrapped*1(") for v in wrapped), result["end"]
        assert result["run"] == {"ours": ERA_C_NAMES, "native": []}
    else:
        assert result["applied"] == [] and result["end"] == pristine
        assert result["run"] == {"ours": [], "native": ERA_C_NAMES[:2]}
    assert result["final"] == pristine
    assert result["restored"] == {"ours": [], "native": ERA_C_NAMES[:2]}


def test_the_matrix_holds_the_orders_users_hit() -> None:
    generated = set(orders(3))
    assert ("import", "install", "uninstall", "install") in generated  # reinstall after an uninstall
    assert ("import", "plugin") in generated  # 0.5.23: the scheduler imports the runner, then load_plugins()
    assert ("plugin", "import") in generated and ("install", "plugin", "import") in generated
    assert len(generated) == 142
    assert set(DEFAULT_ORDERS) <= generated  # the default run's orders are the matrix's own


# -- one behaviour each --------------------------------------------------------------------------------


def test_era_c_defers_when_native_export_cannot_be_switched_off(tmp_path: Path) -> None:
    fake = fake_with(tmp_path, "era_c", {DECODE.rsplit(".", 1)[0]: "decode_via_module_attribute.py"})
    result, stderr = run_child(fake, "defer")
    assert result["run"] == {"ours": ["XPUGraphRunner"], "native": ERA_C_NAMES[:2]}
    assert result["states"][f"{DECODE}._post_process_after_profile"] == "deferred to native"
    assert "deferring to sglang's own export" in stderr


def test_era_b_adopts_helpers_for_eagle_runner() -> None:
    result, _ = run_child(FAKES / "era_b", "adopt")
    assert result["unpatched"] == "AttributeError"  # the upstream bug under --enable-profile-cuda-graph
    assert result["installed"] == [
        ["EAGLEDraftCudaGraphRunner", "profile-of-EAGLEDraftCudaGraphRunner"],
        ["CudaGraphRunner", "profile-of-CudaGraphRunner"],
    ]
    assert result["restored"] is True
    assert result["before"]["_post_process_after_profile"] == "absent"


def test_era_a_records_inline_profile_scoped_to_the_call() -> None:
    result, _ = run_child(FAKES / "era_a", "inline", SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE="1")
    assert result["exported"] == ["EAGLEDraftCudaGraphRunner", "CudaGraphRunner"]
    assert result["kwargs"] == {"record_shapes": True}  # sglang's own arguments reach the profiler
    assert result["during_install"] is True and result["after_call"] is True
    assert result["restored"] is True


def test_install_is_idempotent_and_never_imports_sglang() -> None:
    result, stderr = run_child(FAKES / "era_c", "idempotent")
    assert result["first"] == result["second"] and result["first"]
    assert all(line.endswith(": waiting for import") for line in result["first"])
    assert result["imported"] is False
    assert result["wrapped"] is True and result["depth_one"] is True
    assert result["installed"] is False
    # Guarded by a flag, as OpenTelemetry's instrumentors are: a repeat changes nothing and says so.
    assert "WARNING mixins.sglang_patch sglang-capture-trace: sglang patches already installed" in stderr
    assert "WARNING mixins.sglang_patch sglang-capture-trace: sglang patches not installed; nothing to undo" in stderr


def test_a_failing_patch_never_breaks_the_import() -> None:
    result, stderr = run_child(FAKES / "era_c", "failing_patch")
    assert result["imported"] == "DecodeCudaGraphRunner"
    assert "patch exploded" in stderr
    assert result["applied"] == [f"{DECODE}.capture_one_shape"]
    assert result["states"][f"{DECODE}._post_process_after_profile"] == "skipped"


def test_missing_targets_are_skipped_with_the_reason(tmp_path: Path) -> None:
    frozen = "sglang.srt.speculative.frozen_kv_mtp_cuda_graph_runner"
    result, stderr = run_child(fake_with(tmp_path, "era_c", {frozen: "module_without_class.py"}), "missing")
    frozen_rows = {q: s for q, s in result["states"].items() if q.startswith(f"{frozen}.FrozenKVMTPCudaGraphRunner")}
    assert frozen_rows and set(frozen_rows.values()) == {"skipped"}
    reason = "no class FrozenKVMTPCudaGraphRunner"
    assert f"skipping {frozen}.FrozenKVMTPCudaGraphRunner.capture_one_shape: {reason}" in stderr
    assert {f"{DECODE}._post_process_after_profile", f"{DECODE}.capture_one_shape"} <= set(result["applied"])
    assert result["states"][f"{XPU}._post_process_after_profile"] == "waiting for import"


@pytest.mark.parametrize(
    ("env", "installed"),
    [
        ({}, False),
        ({"SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE": "1"}, True),
        ({"SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE": "bogus"}, False),
    ],
)
def test_register_installs_only_when_switched_on(env: dict, installed: bool) -> None:
    result, stderr = run_child(FAKES / "era_c", "register_twice", **env)
    assert result["installed"] is installed
    assert "WARNING" not in stderr.replace("WARNING sglang-capture-trace: invalid", "")  # a repeat is expected


def test_uninstall_leaves_a_wrapper_laid_over_ours() -> None:
    """Another instrumentor wraps a patched method with wrapt after install(): uninstall() takes ours out
    from under it and leaves theirs; a method replaced outright is left as is, with a warning."""
    result, stderr = run_child(FAKES / "era_c", "overlaid", SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE="1")
    assert result["ours_under_theirs"] is True
    assert result["theirs_kept"] is True and result["theirs_wraps_the_original"] is True
    assert result["replaced_kept"] is True
    assert f"{DECODE}.capture_one_shape was replaced by someone else; left as is" in stderr
