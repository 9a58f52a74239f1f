"""``ls`` and ``clean`` against a real second user (uid 65534): a link at the trace folder pointing into
root's private directory, root's trace folder renamed to a staging name in a parent the attacker owns,
and staging-named entries of other owners. ``clean`` removes only what is verifiably an export's own
staging directory, and ``ls`` says "clean removes it" exactly for those (one rule, ``StaleTemp.kept``).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from analysis_child import run_child

from mixins.formats import SUBDIR
from tests.analysis.conftest import VLLM, dead_name
from tests.second_user import NOBODY, as_nobody

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to fork a child as a second uid")


def stale_staging(parent: Path, tag: int = 0) -> Path:
    """What a killed export of root leaves: a 0700 directory with Kineto's JSON in it."""
    d = parent / dead_name(tag)
    d.mkdir(mode=0o700)
    os.chmod(d, 0o700)
    (d / "trace.json").write_text("{" * 100)
    return d


def temps(argv: list[Any]) -> dict[str, dict[str, Any]]:
    """The ``temporaries`` of ``ls``/``clean --json`` (``ls`` needs a trace: one is put beside them)."""
    if argv[0] == "ls" and not any(Path(argv[1]).glob("*.json.gz")):
        shutil.copy(VLLM, Path(argv[1]) / VLLM.name)
    proc = run_child("analyzer_cli", *argv, "--json")
    assert proc.returncode == 0, proc.stderr
    return {t["name"]: t for t in json.loads(proc.stdout)["temporaries"]}


def test_clean_never_follows_another_users_link_at_the_trace_folder(shared: Path, tmp_path: Path) -> None:
    """nobody's ``DIR/graph_capture_profile`` links into root's private 0700 directory: before, root's
    ``clean DIR`` listed and deleted root's stale staging there."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    mine = stale_staging(private)
    as_nobody(lambda: os.symlink(private, shared / SUBDIR))
    assert temps(["ls", shared]) == {}
    assert temps(["clean", shared]) == {}
    assert mine.is_dir() and (mine / "trace.json").exists()


def test_clean_keeps_roots_trace_folder_renamed_to_a_staging_name(shared: Path) -> None:
    """Where the output directory sits in a folder the attacker owns, it renames root's trace folder to
    a staging-like name: before, root's ``clean`` deleted the real trace."""
    parent = shared / "evil"
    as_nobody(lambda: os.mkdir(parent, 0o755))
    folder = parent / SUBDIR
    folder.mkdir()
    shutil.copy(VLLM, folder / "cuda_graph_capture-R-TP-0.json.gz")
    disguised = parent / dead_name()
    as_nobody(lambda: os.rename(folder, disguised))
    cleaned = temps(["clean", parent])
    assert (disguised / "cuda_graph_capture-R-TP-0.json.gz").read_bytes() == VLLM.read_bytes()
    assert cleaned[disguised.name]["removed"] is False
    assert cleaned[disguised.name]["kept"].startswith("the directory is owned by uid 65534 (nobody)")
    listed = temps(["ls", parent])
    assert listed[disguised.name]["kept"] == cleaned[disguised.name]["kept"]


def test_a_staging_name_on_a_folder_that_is_not_staging_is_kept(tmp_path: Path) -> None:
    """The name proves nothing: root's own folder with a staging name but a trace in it (and 0755) is
    kept, in a directory nobody else can touch."""
    d = tmp_path / dead_name()
    d.mkdir(mode=0o755)
    os.chmod(d, 0o755)
    shutil.copy(VLLM, d / "cuda_graph_capture-R-TP-0.json.gz")
    real = stale_staging(tmp_path, 1)
    cleaned = temps(["clean", tmp_path])
    assert cleaned[d.name]["removed"] is False
    assert cleaned[d.name]["kept"] == "mode 0755, not a staging directory's 0700"
    assert cleaned[real.name]["removed"] is True and not real.exists()
    os.chmod(d, 0o700)
    cleaned = temps(["clean", tmp_path])
    assert cleaned[d.name] == {**cleaned[d.name], "removed": False, "kept": "holds files no export writes"}
    assert (d / "cuda_graph_capture-R-TP-0.json.gz").exists()


def test_ls_promises_a_removal_exactly_when_clean_removes(shared: Path) -> None:
    """Entries of every kind in one shared sticky directory: nobody's stale staging directory, a link
    of nobody's at a staging name, root's own stale one. ``ls`` says "clean removes it" for root's
    only, and ``clean`` removes that one and says why it keeps each other."""
    folder = shared / SUBDIR
    folder.mkdir()
    os.chmod(folder, 0o1777)
    ours = stale_staging(folder, 1)

    def plant() -> None:
        theirs = folder / dead_name(2)
        os.mkdir(theirs, 0o700)
        (theirs / "trace.json").write_text("{")
        os.symlink(ours, folder / dead_name(3))

    as_nobody(plant)
    shutil.copy(VLLM, shared / VLLM.name)
    ls = run_child("analyzer_cli", "ls", shared)
    promised = {line.split(":")[0].removeprefix("temporary ") for line in ls.stdout.splitlines()
                if line.endswith("(capture-trace clean removes it)")}
    assert promised == {ours.name}, ls.stdout
    assert f"temporary {dead_name(2)}: 1 B, its process is gone: stale; clean keeps it (another user's)" in ls.stdout
    listed = temps(["ls", shared])
    cleaned = temps(["clean", shared])
    assert {n for n, t in cleaned.items() if t["removed"]} == promised
    assert {n: t["kept"] for n, t in listed.items()} == {n: t["kept"] for n, t in cleaned.items()}
    assert cleaned[dead_name(3)]["kept"] == "a symbolic link, not a directory"
    assert os.lstat(folder / dead_name(2)).st_uid == NOBODY and os.path.islink(folder / dead_name(3))
