"""install / uninstall / status / ordering / activation of ``mixins.sglang_patch`` without real sglang.

Each case runs in a fresh interpreter (``python -m fake_sglang CASE``, bodies in
``fake_sglang.py``) whose ``sys.path`` starts with a FAKE ``sglang`` package from ``fakes/`` (a
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
    FROZEN,
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
        assert len(wrapped) == 3 and all(v.startswith("wrapped*1[sglang_patch](") for v in wrapped), result["end"]
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

ON = {"SGLANG_ENABLE_CUDA_GRAPH_CAPTURE_TRACE": "1"}
#: case of fake_sglang.py -> (FAKE era, its modules replaced by files of fakes/variants, environment, what
#: the child reports, lines its log holds)
BEHAVIOURS: dict[str, tuple[str, dict[str, str], dict[str, str], dict[str, Any], list[str]]] = {
    # era C: the hook reaches the native export some way we cannot switch off: defer, never two files
    "defer": ("era_c", {DECODE.rsplit(".", 1)[0]: "decode_via_module_attribute.py"}, ON, {
        "run": {"ours": ["XPUGraphRunner"], "native": ERA_C_NAMES[:2]},
        "decode_hook": "deferred to native"}, ["deferring to sglang's own export"]),
    # era B: unpatched, the upstream AttributeError under --enable-profile-cuda-graph; patched, both export
    "adopt": ("era_b", {}, ON, {"unpatched": "AttributeError", "installed": [
        ["EAGLEDraftCudaGraphRunner", "profile-of-EAGLEDraftCudaGraphRunner"],
        ["CudaGraphRunner", "profile-of-CudaGraphRunner"]], "restored": True, "hook_before": "absent"}, []),
    # era A: the profile sglang creates inline is recorded during the call only, with sglang's own arguments
    "inline": ("era_a", {}, ON, {
        "exported": ["EAGLEDraftCudaGraphRunner", "CudaGraphRunner"], "kwargs": {"record_shapes": True},
        "during_install": True, "after_call": True, "restored": True}, []),
    # install never imports sglang; guarded by a flag, as OpenTelemetry's instrumentors are: a repeat
    # changes nothing and says so
    "idempotent": ("era_c", {}, {}, {
        "repeat_same": True, "all_waiting": True, "imported": False, "depth_one": True, "wrapped": True,
        "installed": False}, [
        "WARNING mixins.sglang_patch sglang-capture-trace: sglang patches already installed",
        "WARNING mixins.sglang_patch sglang-capture-trace: sglang patches not installed; nothing to undo"]),
    # a failing patch never breaks the import: that row is skipped, the others apply
    "failing_patch": ("era_c", {}, {}, {
        "imported": "DecodeCudaGraphRunner", "applied": [f"{DECODE}.capture_one_shape"], "decode_hook": "skipped"},
        ["patch exploded"]),
    # missing targets are skipped with the reason
    "missing": ("era_c", {FROZEN: "module_without_class.py"}, {}, {
        "frozen_rows": ["skipped"], "decode_applied": True, "xpu_hook": "waiting for import"},
        [f"skipping {FROZEN}.FrozenKVMTPCudaGraphRunner.capture_one_shape: no class FrozenKVMTPCudaGraphRunner"]),
    # another instrumentor wraps a patched method with wrapt after install(): uninstall() takes ours out from
    # under it and leaves theirs; a method replaced outright is left as is, with a warning
    "overlaid": ("era_c", {}, ON, {
        "ours_under_theirs": True, "theirs_kept": True, "theirs_wraps_the_original": True, "replaced_kept": True},
        [f"{DECODE}.capture_one_shape was replaced by someone else; left as is"]),
}


@pytest.mark.parametrize("case", list(BEHAVIOURS))
def test_one_behaviour(case: str, tmp_path: Path) -> None:
    era, variants, env, reported, logged = BEHAVIOURS[case]
    result, stderr = run_child(fake_with(tmp_path, era, variants) if variants else FAKES / era, case, **env)
    assert result == reported
    assert [line for line in logged if line not in stderr] == [], stderr


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

