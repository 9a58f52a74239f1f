"""Attacks on the export by another local user, run for real: a forked child drops to uid 65534.

The server runs as root here (as SGLang servers often do); the attacker owns or shares the directory
traces go to and tries what the issue describes: swap our temporary names for symlinks to a root-only
file, plant symlinks at Kineto's staging name, reach into our staging directory. Each attack must lose:
the root-only file is untouched, nothing is written where we refused to write, and every published
trace is a regular file holding a complete trace.
"""

from __future__ import annotations

import json
import logging
import os
import re
import select
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from core_helpers import (
    capture_trace,
    export_mm,
    exported_trace,
    load_trace,
    mm_profile,
    op_shapes,
    warnings_of,
)

from mixins import export_cuda_graph_capture_trace, lazy_trace, wait_for_exports
from mixins.output_dir import STAGING_PREFIX, Here, UnsafeDirectoryError
from tests.second_user import NOBODY, Nobody, as_nobody

SECRET = b"root only\n"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to fork a child as a second uid")


def _stopped(stop_fd: int) -> bool:
    return bool(select.select([stop_fd], [], [], 0)[0])


def _errno_of(call: Callable[[], Any]) -> str:
    try:
        call()
    except OSError as exc:
        return str(exc.strerror)
    return "succeeded"


def swap_everything(directory: Path, secret: Path) -> Callable[[Callable[[], None], int, int], dict[str, int]]:
    """The issue's attack as a loop: every name seen in the directory is swapped for a symlink to the
    secret (the chmod-by-path race), gets a symlink planted at ``<name>.tmp`` (Kineto's staging name),
    and, if it is a directory, symlinks planted inside it. On a sync command the round that follows it is
    reported: the names it attacked."""

    def attack(ready: Callable[[], None], control_fd: int, reply_fd: int) -> dict[str, int]:
        rounds = swaps = plants = 0
        stop = False
        ready()
        while not stop or rounds == 0:
            command = os.read(control_fd, 1) if _stopped(control_fd) else b""
            stop = stop or command == b"x"
            rounds += 1
            attacked: list[str] = []
            try:
                names = os.listdir(directory)
            except OSError:
                names = []
            for name in names:
                path = directory / name
                if name.endswith(".moved") or path.is_symlink():
                    continue
                attacked.append(name)
                for plant in [Path(f"{path}.tmp")] + [path / n for n in ("trace.json.tmp", "trace.json")]:
                    plants += _errno_of(lambda p=plant: os.symlink(secret, p)) == "succeeded"  # type: ignore[misc]
                if _errno_of(lambda p=path: os.rename(p, f"{p}.moved")) == "succeeded":  # type: ignore[misc]
                    os.symlink(secret, path)
                    swaps += 1
            if command == b"s":
                os.write(reply_fd, json.dumps(attacked).encode() + b"\n")
        return {"rounds": rounds, "swaps": swaps, "plants": plants}

    return attack


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "root-only"
    path.write_bytes(SECRET)
    os.chmod(path, 0o600)
    return path


@pytest.fixture
def server_env(shared: Path, trace_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``trace_env`` with the traces in a shared sticky directory, as a server's default /tmp."""
    monkeypatch.setenv("SGLANG_TORCH_PROFILER_DIR", str(shared))
    return shared / "graph_capture_profile"


@pytest.fixture
def sticky_dir(server_env: Path) -> Path:
    """``server_env`` made now as root's and both users' (mode 1777, sticky), as /tmp itself."""
    server_env.mkdir()
    os.chmod(server_env, 0o1777)
    return server_env


def _secret_untouched(secret: Path) -> None:
    assert secret.read_bytes() == SECRET and stat.S_IMODE(secret.stat().st_mode) == 0o600


def _refused_once(out: Path, caplog: pytest.LogCaptureFixture, reason: str) -> None:
    with caplog.at_level(logging.WARNING, logger="mixins"):
        for rank in range(3):
            assert export_mm("R", tp_rank=rank) is None
    assert wait_for_exports(60)
    messages = warnings_of(caplog)
    assert len(messages) == 3 and all(f"refusing to write traces into {out}: it {reason}" in m for m in messages)


def _nobodys_directory(path: Path) -> None:
    as_nobody(lambda: os.mkdir(path, 0o755))  # the default location, claimed first


def _writable_by_all(path: Path) -> None:
    path.mkdir()
    os.chmod(path, 0o777)


def _nobodys_link(path: Path) -> None:
    roots_dir = path.parent / "roots"  # a directory of root's the attacker would like traces in
    roots_dir.mkdir()
    as_nobody(lambda: os.symlink(roots_dir, path))


@pytest.mark.parametrize(("make", "reason"), [
    (_nobodys_directory, "is owned by uid 65534"),
    (_writable_by_all, "is writable by every user without the sticky bit (mode 0777)"),
    (_nobodys_link, "is a symbolic link owned by uid 65534"),  # what it points to stays empty: nothing of ours
])
def test_a_directory_another_user_controls_is_refused_while_attacked(
    server_env: Path, secret: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
    make: Callable[[Path], None], reason: str,
) -> None:
    """One WARNING per export (strict mode raises), nothing of ours in it, the root-only file untouched."""
    make(server_env)
    attacker = Nobody(swap_everything(server_env, secret))
    try:
        _refused_once(server_env, caplog, reason)
        monkeypatch.setenv("SGLANG_CAPTURE_TRACE_STRICT", "1")
        with pytest.raises(UnsafeDirectoryError, match=re.escape(reason)):
            export_mm("R")
    finally:
        result = attacker.release()
    assert result["rounds"] > 0
    _secret_untouched(secret)
    assert all(p.lstat().st_uid == NOBODY for p in server_env.iterdir())  # nothing of ours


class PausingProfile:
    """Test synchronisation only: the real profile, with a pause just before (or after) Kineto writes,
    so that an attack runs at a known moment of the real export."""

    def __init__(self, prof: Any, pause: Callable[[str], None], *, after: bool = False) -> None:
        self.prof, self.pause, self.after = prof, pause, after

    def export_chrome_trace(self, path: str) -> None:
        if not self.after:
            self.pause(path)
        self.prof.export_chrome_trace(path)
        if self.after:
            self.pause(path)


def test_attacker_in_a_shared_sticky_output_directory_cannot_reach_the_staging(
    sticky_dir: Path, secret: Path
) -> None:
    """An output directory both may write (root's, mode 1777) is accepted; the staging inside is not theirs."""
    final = sticky_dir / "cuda_graph_capture-Shared-TP-0.json.gz"
    outcomes: dict[str, str] = {}

    def attack_at_kineto_write(kineto_path: str) -> None:
        staging = Path(os.path.realpath(os.path.dirname(kineto_path)))
        assert staging.parent == sticky_dir and stat.S_IMODE(staging.stat().st_mode) == 0o700
        outcomes.update(as_nobody(lambda: {
            "list staging": _errno_of(lambda: os.listdir(staging)),
            "plant at Kineto's staging name": _errno_of(lambda: os.symlink(secret, staging / "trace.json.tmp")),
            "plant at Kineto's output": _errno_of(lambda: os.symlink(secret, staging / "trace.json")),
            "move the staging away": _errno_of(lambda: os.rename(staging, sticky_dir / "moved")),
            "plant at the final name": _errno_of(lambda: os.symlink(secret, final)),
        }))

    prof = PausingProfile(mm_profile(1, 7), attack_at_kineto_write)
    path = export_cuda_graph_capture_trace(prof, runner_name="Shared", tp_rank=0)
    assert path == final and wait_for_exports(60)
    assert outcomes == {
        "list staging": "Permission denied",
        "plant at Kineto's staging name": "Permission denied",
        "plant at Kineto's output": "Permission denied",
        "move the staging away": "Operation not permitted",  # the sticky bit
        "plant at the final name": "succeeded",  # a new name is anyone's in a 1777 directory ...
    }
    assert not final.is_symlink() and final.stat().st_uid == 0  # ... and our rename replaces the link
    assert op_shapes(load_trace(final)) == [[[7, 8], [8, 3]]]
    _secret_untouched(secret)


def test_racing_attacker_in_a_shared_sticky_directory_loses(sticky_dir: Path, secret: Path) -> None:
    """The attacker loops freely and, deterministically, runs a whole round at each moment that matters:
    while our staging directory is empty (Kineto about to write), while it holds Kineto's raw trace, and
    once every final file is published (each sync's round provably attacked those names)."""
    attacker = Nobody(swap_everything(sticky_dir, secret))
    staged: list[str] = []

    def attack_now(kineto_path: str) -> None:
        staging = os.path.basename(os.path.realpath(os.path.dirname(kineto_path)))
        assert staging.startswith(STAGING_PREFIX) and staging in attacker.sync()
        staged.append(staging)

    try:
        paths = [
            export_cuda_graph_capture_trace(PausingProfile(mm_profile(1, 3), attack_now, after=rank % 2 == 1),
                                            runner_name="Race", tp_rank=rank)
            for rank in range(8)
        ]
        assert wait_for_exports(120)
        published = attacker.sync()
    finally:
        result = attacker.release()
    assert len(staged) == 8  # every export's staging attacked, before and after Kineto's write
    assert all(path is not None and path.name in published for path in paths)
    assert result["rounds"] > 0 and result["swaps"] == 0
    _secret_untouched(secret)
    for path in paths:
        assert path is not None and stat.S_ISREG(path.lstat().st_mode) and path.lstat().st_uid == 0
        assert op_shapes(load_trace(path)) == [[[3, 8], [8, 3]]]


def test_kineto_output_is_reopened_without_following_a_symlink(
    trace_env: Path, secret: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def swap_for_symlink(kineto_path: str) -> None:
        os.unlink(kineto_path)
        os.symlink(secret, kineto_path)

    prof = PausingProfile(mm_profile(1, 2), swap_for_symlink, after=True)
    with caplog.at_level(logging.WARNING, logger="mixins"):
        export_cuda_graph_capture_trace(prof, runner_name="NoFollow", tp_rank=0)
        assert wait_for_exports(60)
    assert "Too many levels of symbolic links" in caplog.text
    assert os.listdir(trace_env) == []
    _secret_untouched(secret)


def test_planted_staging_names_stop_neither_the_export_nor_ls(sticky_dir: Path, secret: Path) -> None:
    """Names another user plants in a shared sticky directory, shaped like our staging directories but
    with fields we never write (a pid over 2**31 made os.kill raise OverflowError: every export returned
    None and ``ls`` printed a traceback), or well formed with a dead pid: all left alone, trace saved."""
    here = Here.now()
    planted = [
        f"{STAGING_PREFIX}99999999999.{here.pid_namespace}.ab.{here.host}",
        f"{STAGING_PREFIX}99999999999.{here.pid_namespace}.0a1b2c3d.{here.host}",
        f"{STAGING_PREFIX}0.{here.pid_namespace}.0a1b2c3d.{here.host}",
        f"{STAGING_PREFIX}1{'0' * 200}.{here.pid_namespace}.0a1b2c3d.{here.host}",
        f"{STAGING_PREFIX}4194304.{here.pid_namespace}.0a1b2c3d.{here.host}",  # well formed, no such process
    ]

    def plant() -> list[str]:
        for name in planted:
            os.mkdir(sticky_dir / name, 0o700)
            os.symlink(secret, sticky_dir / name / "trace.json")
        os.symlink(secret, sticky_dir / f"{STAGING_PREFIX}4194303.{here.pid_namespace}.0a1b2c3e.{here.host}")
        return sorted(os.listdir(sticky_dir))

    before = as_nobody(plant)
    path = export_mm("Planted", 4)
    assert path == sticky_dir / "cuda_graph_capture-Planted-TP-0.json.gz" and wait_for_exports(60)
    assert op_shapes(load_trace(path)) == [[[4, 8], [8, 3]]]
    done = capture_trace("ls", str(sticky_dir))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "Planted" in done.stdout
    stale = rf"temporary {re.escape(planted[-1])}: \d+ B, its process is gone: stale"
    assert re.search(stale, done.stdout), done.stdout
    done = capture_trace("clean", str(sticky_dir))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert re.search(rf"temporary {re.escape(planted[-1])}: \d+ B, its process is gone; not removed \(another user's\)",
                     done.stdout), done.stdout
    assert sorted(os.listdir(sticky_dir)) == sorted([*before, path.name])  # the planted names untouched
    _secret_untouched(secret)


@pytest.mark.parametrize("owner", [0, NOBODY])
def test_a_directory_at_the_final_name_cannot_lose_the_trace(
    sticky_dir: Path, secret: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, owner: int
) -> None:
    """rename(2) cannot replace a directory: the trace is saved under a fresh name beside it, one WARNING
    names both, the directory is untouched. Root's, there before a synchronous export, which returns the
    name it saved to (a synchronous failure is None: the EFBIG test); another user's, made after the path
    was returned (background)."""
    final = sticky_dir / "cuda_graph_capture-Taken-TP-0.json.gz"

    def take_the_final_name() -> str:
        os.mkdir(final, 0o755)
        os.symlink(secret, final / "inside")
        return "taken"

    prof = mm_profile(1, 6)
    if owner == 0:
        monkeypatch.setenv("SGLANG_CAPTURE_TRACE_BACKGROUND", "0")
        take_the_final_name()
    else:
        prof = PausingProfile(prof, lambda _kineto_path: as_nobody(take_the_final_name), after=True)
    with caplog.at_level(logging.WARNING, logger="mixins"):
        path = export_cuda_graph_capture_trace(prof, runner_name="Taken", tp_rank=0)
        assert wait_for_exports(60)
    [saved] = [p for p in sticky_dir.iterdir() if p != final]
    assert path == (saved if owner == 0 else final)
    assert re.fullmatch(r"cuda_graph_capture-Taken-TP-0\.[0-9a-f]{8}\.json\.gz", saved.name)
    assert stat.S_ISREG(saved.lstat().st_mode) and saved.lstat().st_uid == 0
    assert op_shapes(load_trace(saved)) == [[[6, 8], [8, 3]]]
    [message] = warnings_of(caplog)
    assert f"saved to {saved} instead of {final}, which holds a directory owned by uid {owner}" in message
    assert final.lstat().st_uid == owner and os.listdir(final) == ["inside"]
    _secret_untouched(secret)


def test_lazy_trace_beside_an_attackers_directory_keeps_one_fallback_name(
    sticky_dir: Path, secret: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Another user's directory at a lazy runner's final name: every re-publish made a new fallback copy
    (20 shapes, 21 entries, 20 WARNINGs). Now one fallback name for the trace's life, replaced on each
    re-publish, one WARNING; once the final name is free again the trace goes there and the copy goes."""
    monkeypatch.setenv("SGLANG_CAPTURE_TRACE_BACKGROUND", "0")
    trace = lazy_trace.trace_for(None, "LazyTaken")
    final = sticky_dir / "cuda_graph_capture-LazyTaken-TP-0.json.gz"
    assert trace.final == final

    def take_the_final_name() -> str:
        os.mkdir(final, 0o755)
        return "taken"

    assert as_nobody(take_the_final_name) == "taken"
    with caplog.at_level(logging.WARNING, logger="mixins"):
        for rows in range(1, 6):
            assert trace.admit()
            trace.add(mm_profile(1, rows), None)
    assert wait_for_exports(60)
    [saved] = [p for p in sticky_dir.iterdir() if p != final]
    assert re.fullmatch(r"cuda_graph_capture-LazyTaken-TP-0\.[0-9a-f]{8}\.json\.gz", saved.name)
    assert stat.S_ISREG(saved.lstat().st_mode) and saved.lstat().st_uid == 0
    assert [shape[0][0] for shape in op_shapes(load_trace(saved))] == [1, 2, 3, 4, 5]
    [message] = warnings_of(caplog)
    assert f"saved to {saved} instead of {final}, which holds a directory owned by uid 65534" in message

    as_nobody(lambda: os.rmdir(final))
    assert trace.admit()
    trace.add(mm_profile(1, 6), None)
    assert wait_for_exports(60)
    assert os.listdir(sticky_dir) == [final.name]
    assert [shape[0][0] for shape in op_shapes(load_trace(final))] == [1, 2, 3, 4, 5, 6]
    _secret_untouched(secret)


@contextmanager
def hardlinks_unprotected() -> Iterator[bool]:
    """fs.protected_hardlinks=0 for the block when this (root) process can set it; restored after."""
    knob = Path("/proc/sys/fs/protected_hardlinks")
    try:
        old = knob.read_text().strip()
        if old != "0":
            knob.write_text("0")
    except OSError:
        yield False
        return
    try:
        yield True
    finally:
        if old != "0":
            knob.write_text(old)


def test_hard_link_to_a_root_symlink_at_the_output_directory_is_refused(
    server_env: Path, shared: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Where fs.protected_hardlinks=0 another user can hard-link root's symbolic link (owner root) to the
    output directory's name; one link count too many gives it away. Root's own link (one) still works."""
    roots_dir = tmp_path / "roots"
    roots_dir.mkdir()
    roots_link = shared / "roots-link"
    os.symlink(roots_dir, roots_link)
    with hardlinks_unprotected() as unprotected:
        if not unprotected:
            pytest.skip("cannot set /proc/sys/fs/protected_hardlinks=0 here: uid 65534 cannot hard-link root's link")
        result = as_nobody(lambda: _errno_of(lambda: os.link(roots_link, server_env, follow_symlinks=False)))
    assert result == "succeeded" and server_env.lstat().st_nlink == 2 and server_env.lstat().st_uid == 0
    _refused_once(server_env, caplog, "is a symbolic link with 2 hard links")
    assert list(roots_dir.iterdir()) == []

    os.unlink(server_env)  # root's own symbolic link, one link: followed as before
    os.symlink(roots_dir, server_env)
    path = exported_trace("Linked")
    assert os.listdir(roots_dir) == [path.name]
