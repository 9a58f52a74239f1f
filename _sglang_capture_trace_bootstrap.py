"""Start-up hook: ``sglang_capture_trace.pth`` runs :func:`run` in every interpreter of the environment
that has an ``SGLANG_*`` variable set (docs/DESIGN.md §4).

A top-level module with a unique name, standard library only: PyPI has other top-level ``mixins``
packages, so nothing beyond ``os`` is imported until the switch says the hook is wanted, and ``mixins``
only once it is the one this distribution installed (its recorded files).
"""

import os

from _sglang_capture_trace_switches import DISTRIBUTION, OWN_PTH, PACKAGE, startup_hook_wanted, warn_misspelt_variables

# No __future__, typing or collections.abc import at interpreter start-up: annotations are strings.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from importlib.metadata import Distribution


# -- is the importable ``mixins`` ours? ----------------------------------------------------------------


def _file_hash(path: str) -> str:
    import base64
    import hashlib

    with open(path, "rb") as handle:
        digest = hashlib.sha256(handle.read()).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def _editable_roots(dist: "Distribution") -> "Iterator[str]":
    """Source directories an editable install put on sys.path (the path lines of its own ``.pth``)."""
    for record in dist.files or ():
        if record.suffix != ".pth" or record.name == OWN_PTH:
            continue
        try:
            text = record.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.strip() and not line.startswith(("#", "import ", "import\t")):
                yield line.strip()


def _is_recorded_init(dist: "Distribution", origin: str) -> bool:
    """``origin`` is the ``mixins/__init__.py`` the wheel installed, with the recorded content."""
    for record in dist.files or ():
        if record.as_posix() != f"{PACKAGE}/__init__.py":
            continue
        if os.path.realpath(str(dist.locate_file(record))) != origin:
            return False
        return record.hash is None or (record.hash.mode == "sha256" and record.hash.value == _file_hash(origin))
    return False


def ownership_problem() -> "str | None":
    """None when the importable ``mixins`` is this distribution's, else why not (nothing is imported)."""
    from importlib import metadata, util

    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return f"the distribution {DISTRIBUTION} is not installed"
    spec = util.find_spec(PACKAGE)
    if spec is None or not spec.origin:
        return f"no importable {PACKAGE!r} package"
    origin = os.path.realpath(spec.origin)
    if _is_recorded_init(dist, origin):
        return None
    if any(origin == os.path.realpath(os.path.join(root, PACKAGE, "__init__.py")) for root in _editable_roots(dist)):
        return None
    return (
        f"the importable {PACKAGE!r} ({origin}) is not the one {DISTRIBUTION} installed; another distribution "
        f"ships a top-level {PACKAGE!r} (PyPI's 'mixins' and 'django-mixins' do)"
    )


_ran = False


def run() -> None:
    """Install sglang's post-import hooks when wanted; never raises, never imports a foreign ``mixins``."""
    global _ran
    if _ran:
        return
    _ran = True
    try:
        warn_misspelt_variables()
        if not startup_hook_wanted():
            return
        problem = ownership_problem()
        if problem is not None:
            import logging

            logging.getLogger("mixins").warning(
                "sglang-capture-trace: start-up hook does nothing: %s. Remove the other package or use a "
                "separate environment.",
                problem,
            )
            return
        from mixins import sglang_patch

        sglang_patch.PATCH.install()
    except Exception:
        import logging

        logging.getLogger("mixins").warning("sglang-capture-trace: start-up hook failed", exc_info=True)
