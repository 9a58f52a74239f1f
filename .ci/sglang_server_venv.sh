#!/usr/bin/env bash
# Build (or reuse) the virtualenv that runs a real sglang 0.5.23 SERVER on CPU for tests/server, outside
# the repo (.ci/venv_lib.sh), and install this checkout into it as a user would (pip, non-editable).
#
# Usage: bash .ci/sglang_server_venv.sh
#   Prints the venv path as the only line on stdout (progress goes to stderr).
#   tests/sglang-envs/sglang-0.5.23-server-cpu-deps.txt: the runner-module list plus the server's own
#   imports (its header says how it was resolved). torchvision stays as in that list: PyPI's build is
#   CUDA-linked and the test's stand-ins define the two operators its import needs (tests/server/standins).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/venv_lib.sh"

# torch: the local CPU wheel; wrapt, msgspec, rich (+ markdown-it-py, mdurl): our runtime dependencies,
# pinned as in the main test venv (pygments and msgspec come with the deps list).
# The server list names the runner-module list with `-r`; cached_venv hashes only the list it is given, so
# hand it both as one file (kept in the cache, rewritten each call): a change to either builds a fresh venv,
# and .ci/venv_lib.sh stays as it is (editing it would rebuild every cached venv).
lists="$repo/tests/sglang-envs"
mkdir -p "$cache"
combined="$cache/server-0.5.23-deps.txt"
{ cat "$lists/sglang-0.5.23-cpu-deps.txt"; grep -v '^-r' "$lists/sglang-0.5.23-server-cpu-deps.txt"; } >"$combined.$$"
mv -f "$combined.$$" "$combined"
cached_venv "server-0.5.23" "$combined" \
    "import importlib.util as u, torch, wrapt, rich, msgspec, fastapi, uvicorn, xgrammar, pytest; assert u.find_spec('sglang')" \
    torch==2.13.0 sglang==0.5.23 wrapt==2.5.2 rich==15.0.0 markdown-it-py==4.3.0 mdurl==0.1.2
install_project
echo "$venv"
