#!/usr/bin/env bash
# Build (or reuse) the virtualenv that runs tests/core on the oldest supported torch (the floor in
# pyproject.toml), outside the repo (.ci/venv_lib.sh).
#
# Usage: bash .ci/torch_floor_venv.sh [VERSION]   (default: the floor, 2.7.1)
#   Prints the venv path as the only line on stdout (progress goes to stderr).
#   VERSION needs tests/torch-envs/torch-VERSION-deps.txt: torch and the exact dependencies pip resolved
#   for it from PyPI. PyPI's Linux wheels are CUDA builds: with their CUDA libraries installed they import
#   and profile on a CPU-only machine. Measured here (2-core VM, load average 10-20 from other jobs):
#   2.8 GB to download (3.5 min), 622 s to build the venv with pip's cache warm, 5.2 GB installed;
#   tests/core on it: 97 passed in 212 s.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/venv_lib.sh"

version="${1:-2.7.1}"
# Our runtime dependencies, pinned as in the main test venv (rich's own: markdown-it-py, mdurl, pygments;
# numpy: the analyzer's columns, which `ls` and `summary` in tests/core run).
cached_venv "torch-$version" "$repo/tests/torch-envs/torch-$version-deps.txt" \
    "import torch, wrapt, msgspec, rich, numpy, pytest; assert torch.__version__.startswith('$version'), torch.__version__" \
    wrapt==2.5.2 msgspec==0.23.0 rich==15.0.0 numpy==2.4.6 markdown-it-py==4.3.0 mdurl==0.1.2 pygments==2.21.0
install_project
echo "$venv"
