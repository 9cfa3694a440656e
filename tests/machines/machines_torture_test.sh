#!/usr/bin/env bash
# The machines torture at a bounded size (ctest machines_torture_test; `make
# torture` runs it at full size): 3 machines, 33 faults (three of each
# kind), lease 5 s. Skipped (77) without root. Usage: BUILD_DIR SOURCE_DIR.
# Everything the full size fails on fails it, but the per-kind minimum
# (docs/RELIABILITY.md, "Many machines under faults"). A run takes 20-60 s:
# one that has not ended in 120 s is a stall, reported with the hung
# workers' stacks and cleaned up, well before ctest's timeout (which would
# kill the harness and leave the machines' processes behind).
set -euo pipefail
BUILD=$1 SOURCE=$2
if ((EUID != 0)); then echo "machines_torture_test: needs root; skipped"; exit 77; fi
exec "$BUILD/wizq_machines_torture" --build "$BUILD" --source "$SOURCE" \
  --machines 3 --faults "${WIZQ_MACHINES_FAULTS:-33}" --min-per-kind 0 \
  --lease 5 --max-seconds 240 --run-seconds 120
