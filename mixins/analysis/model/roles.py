"""What a trace is (its role) and which server start it came from (its run), decided once per trace:
each command reads the roles it names (:data:`READS`) and refuses another in one line (docs/DESIGN.md §7.4)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any, NamedTuple

from msgspec.structs import replace

from mixins.analysis.model import events as E
from mixins.analysis.model.identity import Identity, identity_of
from mixins.analysis.model.segments import segments_of
from mixins.analysis.model.timeline import Timeline

__all__ = [
    "CAPTURE", "REPLAY", "PROFILE", "FOREIGN", "ROLES", "ROLE_NAMES", "Role", "role_of", "READS", "refusal",
    "run_key", "run_labels", "RunKey", "replay_ok", "identify", "role_in",
]

CAPTURE, REPLAY, PROFILE, FOREIGN = "capture", "replay", "profile", "foreign"
ROLES = (CAPTURE, REPLAY, PROFILE, FOREIGN)
# how a role reads in a sentence ("it is a …")
ROLE_NAMES = {
    CAPTURE: "capture", REPLAY: "replay (serving) trace", PROFILE: "plain profile", FOREIGN: "foreign trace",
}

# what each command reads; ``attribute`` reads a replay first (REPLAY) and captures after it
READS: dict[str, frozenset[str]] = {
    "summary": frozenset(ROLES),  # describes any trace: counts per segment
    "ls": frozenset(ROLES),
    "diff": frozenset({CAPTURE}),
    "check": frozenset({CAPTURE}),
    "time": frozenset({CAPTURE, PROFILE}),  # a profile's phases are its eager passes; a replay has none
    "report": frozenset({CAPTURE}),
    "attribute": frozenset({CAPTURE}),  # its CAPTURE arguments; the REPLAY: see ``replay_ok``
}

# what to do instead, by command, when a file's role is not one it reads
_INSTEAD = {
    "time": "time reads captures (start-up); a replay is attributed to its captures: "
            "capture-trace attribute REPLAY CAPTURE",
    "check": "check compares captures across ranks",
    "diff": "diff compares two captures (or two folders of them)",
    "report": "report reads captures",
    "attribute": "CAPTURE takes the traces taken at start-up, with CUDA-graph capture",
}
# ... and by role, where that says more
_INSTEAD_OF_ROLE = {
    ("attribute", REPLAY): "give it as REPLAY, the first argument, and its captures after it",
    ("report", REPLAY): "report reads captures; give a replay as --replay",
}


class Role(NamedTuple):
    """A role and what the file holds that decided it (said when the role is refused)."""

    role: str
    evidence: str


def role_of(tl: Timeline, identity: Identity) -> Role:
    """The role of a trace from what it holds (docs/DESIGN.md §7.4)."""
    kinds = set(tl.calls.kind)
    windows = E.C_BEGIN in kinds
    graphs = E.C_GRAPH in kinds
    launches = "graph launches" if graphs else "no graph launches"
    if windows:
        return Role(CAPTURE, f"holds capture windows and {launches}")
    if isinstance(tl.metadata.get("capture_trace"), dict):
        return Role(CAPTURE, f"holds capture-trace's header and {launches}")
    _, source = segments_of(tl.ranges, identity)
    if source != "all":
        return Role(CAPTURE, f"holds capture segments ({source}) and {launches}")
    if graphs:
        return Role(REPLAY, "holds graph launches and no capture windows")
    u = tl.undated
    rows = (tl.ops, tl.calls.kind, tl.device.kind, u.ops, u.calls.kind, u.device.kind, tl.ranges)
    if any(len(r) for r in rows) or tl.span is not None:
        return Role(PROFILE, "holds no CUDA-graph content (no capture window, no graph launch)")
    return Role(FOREIGN, "holds no CPU op, runtime call or device work")


def replay_ok(role: Role) -> bool:
    """``attribute``'s REPLAY: any trace with graph launches (also one that captured too)."""
    return "no graph launch" not in role.evidence


def refusal(path: str, role: Role, command: str, instead: str | None = None) -> str:
    """The one line a command says for a file of a role it does not read (``path`` "": no prefix)."""
    instead = instead or _INSTEAD_OF_ROLE.get((command, role.role)) or _INSTEAD.get(command, command)
    head = f"{role.evidence}: it is a {ROLE_NAMES[role.role]}; {instead}"
    return f"{path} {head}" if path else head


def identify(tl: Timeline) -> Identity:
    """The trace's identity (``identity.identity_of``) with its role and run."""
    identity = identity_of(tl.path, tl.metadata)
    role, evidence = role_of(tl, identity)
    return replace(identity, role=role, role_evidence=evidence, run=run_key(tl.path, identity))


def role_in(identity: Identity) -> Role:
    """The role :func:`identify` decided (FOREIGN when none was: an identity built by hand)."""
    return Role(identity.role or FOREIGN, identity.role_evidence or "was not read for its role")


# -- runs ---------------------------------------------------------------------------------------------

RunKey = tuple[Any, ...]
# what our metadata says of the server that wrote a trace: equal for every runner and rank of one start,
# on every node of it (the host is not: a multi-node server's ranks, collected into one folder, are one run)
_SERVER = ("tp_size", "dp_size", "world_size", "sglang_version", "torch_version", "device")


def run_key(path: str, identity: Identity) -> RunKey:
    """Which server start a trace came from: its folder and, for our traces, what the metadata says of the
    server (docs/DESIGN.md §7.4). Two starts of one configuration in one folder are one run (told apart
    by capture index)."""
    folder = os.path.dirname(path) or "."
    if identity.source != "metadata":
        return (folder,)
    return (folder, *(identity.extra.get(k) for k in _SERVER))


def run_labels(keys: Iterable[RunKey]) -> dict[RunKey, str]:
    """Each run's label, in order of first appearance: its folder; ``folder #n`` where a folder holds
    several runs."""
    order = list(dict.fromkeys(keys))
    per_folder: dict[str, list[RunKey]] = {}
    for k in order:
        per_folder.setdefault(k[0], []).append(k)
    out = {}
    for folder, ks in per_folder.items():
        for n, k in enumerate(ks, 1):
            out[k] = folder if len(ks) == 1 else f"{folder} #{n}"
    return out
