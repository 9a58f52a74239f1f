#!/usr/bin/env bash
# The README's test command RUNS times in a row (default 10) while `stress-ng --cpu 4` loads this 2-core
# machine (the suite must never flake under load), then a pass/fail tally. Each run's output is kept.
#
# Usage: bash scripts/soak_tests.sh [RUNS]
#   Needs the README's .venv (its install command) and Debian's stress-ng (apt-get install stress-ng).
#   Exit 0 when every run passed, 1 otherwise, 2 when something it needs is missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
runs="${1:-10}"
command -v stress-ng >/dev/null || { echo "soak_tests.sh: no stress-ng (apt-get install stress-ng)" >&2; exit 2; }
[ -x .venv/bin/python ] || { echo "soak_tests.sh: no .venv here: run the README's install command first" >&2; exit 2; }
logs="$(mktemp -d -t soak-tests.XXXXXX)"
stress-ng --cpu 4 --timeout 0 --quiet &  # until killed: four busy workers on two cores
stress=$!
trap 'kill "$stress" 2>/dev/null || true; wait "$stress" 2>/dev/null || true' EXIT
echo "soak: $runs runs of '.venv/bin/python -m pytest -n auto' under stress-ng --cpu 4; logs in $logs"
passed=0 failed=0
for run in $(seq 1 "$runs"); do
    start=$EPOCHSECONDS
    if .venv/bin/python -m pytest -n auto > "$logs/run-$run.log" 2>&1; then
        passed=$((passed + 1)) verdict=passed
    else
        failed=$((failed + 1)) verdict=FAILED
    fi
    echo "run $run/$runs: $verdict in $((EPOCHSECONDS - start)) s, load average $(cut -d' ' -f1 /proc/loadavg):" \
        "$(tail -1 "$logs/run-$run.log")"
    grep -E '^(FAILED|ERROR) ' "$logs/run-$run.log" | sed 's/^/    /' || true
done
echo "soak: $passed passed, $failed failed"
[ "$failed" = 0 ]
