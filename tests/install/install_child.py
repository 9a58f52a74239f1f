"""What each interpreter of the installed venvs runs: ``python -m install_child CASE [ARG...]``.

One function per child-process body, so ruff and mypy check them like any other code. These run in the
test venvs (no torch, no repository on the path: ``installed_venvs.Venv.run`` adds only this directory),
so this module imports the standard library only, and nothing at the top beyond ``sys`` (no
``__future__`` either): ``probe`` reports every module the interpreter holds.
"""

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # nothing imported at run time: probe() lists the modules
    from collections.abc import Callable


def probe() -> None:
    """What a fresh interpreter holds right after start-up (the .pth has run), and whether sglang is patched."""
    import json

    modules = sorted(sys.modules)
    patch = sys.modules.get("mixins.sglang_patch")
    installed = bool(patch and patch.PATCH.installed)
    print(json.dumps({"modules": modules, "installed": installed}))


def nothing() -> None:
    """Start-up alone (with ``-X importtime``: what the .pth costs)."""


def torch_missing() -> None:
    """Prints whether torch is unimportable here."""
    import importlib.util

    print(importlib.util.find_spec("torch") is None)


def cli(*argv: str) -> None:
    """The installed CLI; prints its exit code and which heavy modules it loaded, as JSON."""
    import json

    from mixins.cli import main

    code = main(argv)
    print(json.dumps({"code": code, "loaded": sorted(m for m in ("torch", "wrapt", "sglang") if m in sys.modules)}))


CASES: "dict[str, Callable[..., None]]" = {case.__name__: case for case in (probe, nothing, torch_missing, cli)}


def main(argv: "list[str] | None" = None) -> None:
    case, *args = sys.argv[1:] if argv is None else argv
    CASES[case](*args)


if __name__ == "__main__":
    main()
