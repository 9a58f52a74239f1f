"""The orders of import / install / plugin load / uninstall that the matrix tests run, and the model of
what must hold after each step (shared by the FAKE matrix and the real-sglang one)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

ACTIVATION = ("install", "plugin", "uninstall")


def orders(max_steps: int) -> list[tuple[str, ...]]:
    """Every sequence of up to ``max_steps`` activation steps, with the import at every position."""
    found: list[tuple[str, ...]] = []
    for length in range(max_steps + 1):
        for steps in itertools.product(ACTIVATION, repeat=length):
            found.extend((*steps[:at], "import", *steps[at:]) for at in range(length + 1))
    return found


#: The orders the default run checks (every one is in ``orders(3)``; the rest run under the ``exhaustive``
#: marker): the import alone, each activation step once before and once after it, and the multi-step
#: orders users hit (0.5.23's import then plugin load after an install, an uninstall after the patches
#: applied, a reinstall after an uninstall).
DEFAULT_ORDERS = (
    *orders(1),
    ("install", "plugin", "import"),
    ("install", "import", "uninstall"),
    ("import", "install", "uninstall", "install"),
)


def installed_after(steps: tuple[str, ...]) -> bool:
    """Install and plugin load (with the switch on) install; uninstall uninstalls; import changes nothing."""
    installed = False
    for step in steps:
        if step != "import":
            installed = step != "uninstall"
    return installed


def run_steps(steps: tuple[str, ...], *, do_import: Callable[[], object], load_plugins: Callable[[], object]
              ) -> list[dict[str, str]]:
    """Run ``steps`` in this process (``install`` / ``uninstall`` on its patch; ``import`` and ``plugin``
    given), every row's status after each."""
    from mixins import sglang_patch

    actions = {"import": do_import, "install": sglang_patch.PATCH.install, "plugin": load_plugins,
               "uninstall": sglang_patch.PATCH.uninstall}
    after_each = []
    for step in steps:
        if step not in actions:
            raise SystemExit(f"unknown step {step!r}")
        actions[step]()
        after_each.append({s.target.qualname: s.state.value for s in sglang_patch.PATCH.status()})
    return after_each


def expected_states(
    steps: tuple[str, ...], qualnames: list[str], applies: Callable[[str], str | None]
) -> dict[str, str]:
    """Every row's status after ``steps``: not installed; else waiting until its module is imported;
    then ``applies(qualname)`` ("applied" / "skipped", or None for a module this sglang lacks)."""
    installed, imported = installed_after(steps), "import" in steps
    expected = {}
    for qualname in qualnames:
        state = applies(qualname) if installed and imported else None
        expected[qualname] = "not installed" if not installed else state or "waiting for import"
    return expected
