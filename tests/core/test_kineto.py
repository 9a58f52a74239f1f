"""Kineto's private behaviour (mixins/kineto.py), re-checked on the installed torch with real exports."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
from core_helpers import child, child_env, mm_profile, strace_log

from mixins import kineto


def test_kineto_stages_at_path_dot_tmp_without_nofollow_then_renames(tmp_path: Path) -> None:
    command = child("kineto_export", str(tmp_path / "k.json"))
    lines = strace_log(command, child_env(), "openat,rename,renameat,renameat2", tmp_path)
    staging = str(tmp_path / f"k.json{kineto.STAGING_SUFFIX}")
    [opened] = [line for line in lines if f'"{staging}"' in line and "openat(" in line]
    assert "O_CREAT" in opened and "O_TRUNC" in opened and "O_NOFOLLOW" not in opened
    assert any(re.search(rf'rename(at2?)?\(.*"{re.escape(staging)}", .*"{re.escape(str(tmp_path / "k.json"))}"', line)
               for line in lines)


def test_trace_name_is_the_given_path_in_the_tail(tmp_path: Path) -> None:
    path = str(tmp_path / "k.json")
    kineto.write_json(mm_profile(1, 2), path)
    tail = Path(path).read_bytes()[-4096:].rstrip()
    assert kineto.tail_is_complete(tail) and tail.endswith(b"}")
    assert tail.rindex(kineto.TRACE_NAME_KEY) > tail.rindex(b"]")  # the last key, after traceEvents
    renamed = kineto.rename_trace(tail, path, b'"/final.json.gz"')
    # torch 2.13 ends with it; 2.7.1 writes displayTimeUnit and baseTimeNanoseconds after it
    assert renamed.count(b'"traceName": "/final.json.gz"') == 1 and path.encode() not in renamed
    assert renamed.endswith(b"}") and len(renamed) == len(tail) - len(json.dumps(path)) + len(b'"/final.json.gz"')


def test_a_profile_exports_once(tmp_path: Path) -> None:
    prof = mm_profile(1, 2)
    kineto.write_json(prof, str(tmp_path / "a.json"))
    with pytest.raises(kineto.AlreadyExportedError, match=kineto.ALREADY_SAVED):
        kineto.write_json(prof, str(tmp_path / "b.json"))


def test_a_tail_without_trace_name_is_accepted_by_its_brackets_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    kineto._fallbacks_logged.clear()
    with caplog.at_level(logging.INFO, logger="mixins"):
        assert kineto.tail_is_complete(b'{"ph": "X"}\n  ]\n}')
        assert kineto.tail_is_complete(b'{"ph": "X"}]}')
        assert not kineto.tail_is_complete(b'{"ph": "X"},\n  {"ph": ')  # truncated
        assert not kineto.tail_is_complete(b'"deviceProperties": {}')  # an object closes, not the trace
    assert caplog.text.count("no traceName key") == 1


@pytest.mark.parametrize(("data", "parts"), [
    (b'{"a": 1, "traceEvents": [ {"x": [1]} ], "traceName": "p" }',
     (b'{"a": 1, "traceEvents": [', b'{"x": [1]}', b'], "traceName": "p" }')),
    # torch 2.7's Kineto without a GPU writes ``"ERROR": ["… gpuGetDeviceCount failed …"]`` after the events:
    # a list of strings there is Kineto's layout; other lists still are not
    (b'{"traceEvents": [ {"x": 1} ],\n  "ERROR": ["ERROR: a ] b \\" c", "d"],\n'
     b'  "traceName": "p", "displayTimeUnit": "ms" }',
     (b'{"traceEvents": [', b'{"x": 1}', b'],\n  "ERROR": ["ERROR: a ] b \\" c", "d"],\n  "traceName": "p", '
      b'"displayTimeUnit": "ms" }')),
    (b'{"a": 1}', None),
    (b'{"traceEvents": [ {} ], "later": [1] }', None),
    (b'{"traceEvents": [ {} ', None),
    (b'{"traceEvents": [ {} ], "later": [1], "traceName": "p" }', None),
])
def test_split_trace_takes_kinetos_layout_only(data: bytes, parts: tuple[bytes, bytes, bytes] | None) -> None:
    """(head through ``"traceEvents": [``, the events, the rest), which join back into the same document;
    IncompleteTraceError for any other layout."""
    if parts is None:
        with pytest.raises(kineto.IncompleteTraceError):
            kineto.split_trace(data)
        return
    head, events, tail = kineto.split_trace(data)
    assert (head, events, tail) == parts
    assert json.loads(head + events + tail) == json.loads(data)


def test_split_trace_takes_kinetos_unescaped_trace_name() -> None:
    """Kineto writes traceName's path unescaped (a `"` in a directory name): the tail is kept as written
    and ``rename_trace`` puts the final name there, escaped."""
    written = '/tmp/q"dir/trace.json'
    data = b'{"traceEvents": [ {"x": 1} ],\n  "traceName": "' + written.encode() + b'",\n  "displayTimeUnit": "ms"\n}'
    head, events, tail = kineto.split_trace(data)
    final = json.dumps('/tmp/q"dir/cuda_graph_capture-R-TP-0.json.gz').encode()
    doc = json.loads(head + events + kineto.rename_trace(tail, written, final))
    assert doc["traceName"] == '/tmp/q"dir/cuda_graph_capture-R-TP-0.json.gz' and doc["traceEvents"] == [{"x": 1}]


def test_split_trace_on_real_kineto_output(tmp_path: Path) -> None:
    """This torch's Kineto JSON splits into a head, events that parse to its traceEvents, and a tail."""
    import torch

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        with torch.profiler.record_function("capture::tokens=3"):
            torch.ones(3, 3).sum()
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    data = (tmp_path / "t.json").read_bytes()
    head, events, tail = kineto.split_trace(data)
    assert json.loads(b"[" + events + b"]") == json.loads(data)["traceEvents"]
    assert json.loads(head + b"\n" + events + b"\n" + tail)["traceName"] == json.loads(data)["traceName"]
