#!/usr/bin/env bash
# reuse_bench.sh: what reusing a task costs against running it (make bench;
# docs/BENCHMARKS.md, "Reuse benchmark").
#
#   bash bench/reuse_bench.sh WIZQ_BINARY [N=10000] [JOBS=2]
#
# A workflow whose root task fans out N Leaf tasks (each `./leaf.sh`, a
# script file of the workflow's directory, so def_hash reads and hashes a
# file for every task) runs once, live: every task is a process, every
# transition durable. Then `wizq run --fresh` archives it and starts over:
# every task matches the previous run and completes from its recorded result
# without running. Printed: wall time per task of each run, and audit.jsonl
# bytes per task of each (the reusing run's log holds a task_submitted and a
# task_completed with "reused" per task, no claims). Runs in a temporary
# directory next to the binary (the build's filesystem, not a tmpfs). The
# MACHINE line (bench/machine_probe.sh: fdatasync latency, load, cores,
# measured there) is printed before the runs and after them.
#
# Last line: RESULT live_ms_per_task=<x> reused_ms_per_task=<y>
#            live_bytes_per_task=<a> reused_bytes_per_task=<b> ratio=<x/y>
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)

WIZQ=${1:?usage: reuse_bench.sh WIZQ_BINARY [N] [JOBS]}
N=${2:-10000}
JOBS=${3:-2}
WIZQ=$(cd "$(dirname "$WIZQ")" && pwd)/$(basename "$WIZQ")
[ -x "$WIZQ" ] || { echo "reuse_bench: $WIZQ is not executable" >&2; exit 2; }
. "$BENCH_DIR/machine_probe.sh"

WORK=$(mktemp -d "$(dirname "$WIZQ")/reuse-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cat >"$WORK/wf.json" <<JSON
{ "entrypoint": "Root",
  "steps": [
    { "name": "Root", "action": { "kind": "Command",
        "script": "cat >/dev/null; seq 0 \$((N - 1)) | awk 'BEGIN{printf \"[\"} NR>1{printf \",\"} {printf \"{\\\\\"kind\\\\\":\\\\\"Leaf\\\\\",\\\\\"value\\\\\":{\\\\\"i\\\\\":%d}}\", \$1} END{print \"]\"}'" },
      "next": ["Leaf"] },
    { "name": "Leaf", "action": { "kind": "Command", "script": "./leaf.sh" },
      "next": [] } ] }
JSON
printf '#!/bin/sh\ncat >/dev/null\necho []\n' >"$WORK/leaf.sh"
chmod +x "$WORK/leaf.sh"

now_ms() { date +%s%3N; }
run() {
  N=$N "$WIZQ" run "$WORK/wf.json" --dir "$WORK/install" --jobs "$JOBS" \
    --quiet "$@"
}
log_bytes() {
  # The log without its preallocated free space (NULs) at the end.
  tr -d '\000' <"$WORK/install/.wizard/audit.jsonl" | wc -c
}

machine_line "$WORK"
t0=$(now_ms); run; t1=$(now_ms)
live_bytes=$(log_bytes)
t2=$(now_ms); run --fresh; t3=$(now_ms)
reused_bytes=$(log_bytes)
reused=$("$WIZQ" status --dir "$WORK/install" --json |
         awk -F'"reused":' 'NF>1{split($2,a,","); print a[1]; exit}')
tasks=$((N + 1))
[ "$reused" = "$tasks" ] || { echo "reuse_bench: $reused of $tasks reused" >&2; exit 1; }
machine_line "$WORK"

awk -v n="$tasks" -v lt=$((t1 - t0)) -v rt=$((t3 - t2)) \
    -v lb="$live_bytes" -v rb="$reused_bytes" 'BEGIN {
  printf "tasks %d: live run %.0f ms (%.3f ms/task), reusing run %.0f ms (%.4f ms/task)\n", n, lt, lt/n, rt, rt/n
  printf "audit.jsonl: live %.0f bytes (%.0f/task), reusing %.0f bytes (%.0f/task)\n", lb, lb/n, rb, rb/n
  printf "RESULT live_ms_per_task=%.3f reused_ms_per_task=%.4f live_bytes_per_task=%.0f reused_bytes_per_task=%.0f ratio=%.1f\n", lt/n, rt/n, lb/n, rb/n, (lt/n)/(rt/n)
}'
