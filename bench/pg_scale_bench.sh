#!/bin/bash
# A worker's memory and `status`'s server time against the size of a run on
# the PostgreSQL store (issue 23; docs/BENCHMARKS.md, "PostgreSQL store").
#
#   bash bench/pg_scale_bench.sh [BUILD_DIR] [SIZES]   # SIZES: 10000,1000000
#
# Starts a throwaway cluster of its own (build/with_pg_cluster, fsync on,
# pg_stat_statements loaded). For each size N, a run of N pending no-op
# Leaf tasks is made (Root spawns N/1000 Mid tasks, each 1000 Leaves; a
# first worker runs Root and the Mids and is stopped), then:
#   - a second worker (`wizq run --jobs 4`, MALLOC_CONF=thp:never) completes
#     10^4 Leaves and is stopped: its peak RSS (VmHWM from /proc);
#   - `wizq status --run-id R` (the default view: counts, workers, prompts,
#     failures and the first 50 lines of the tree): the server time of
#     every statement it ran, summed from pg_stat_statements, and its wall
#     time; and the wall time of `wizq status --all` (every task).
# The ratios are against the smallest size, measured in the same run.
set -euo pipefail
BUILD=${1:-build}
SIZES=${2:-10000,1000000}
if [ -z "${WIZQ_STORE:-}" ]; then
  exec "$BUILD/with_pg_cluster" --fsync \
    --set "shared_preload_libraries = 'pg_stat_statements'" \
    --set "pg_stat_statements.track = all" \
    bash "$0" "$BUILD" "$SIZES"
fi
WIZQ=$(realpath "$BUILD/wizq")
WORK=$(mktemp -d /tmp/wizq-pg-scale-XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
psql -d "$WIZQ_STORE" -qtAc "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"

cat >"$WORK/wf.json" <<'EOF'
{ "entrypoint": "Root",
  "steps": [
    { "name": "Root",
      "action": { "kind": "Command", "script": "jq -c '[range(.value.mids) | {kind: \"Mid\", value: {m: .}}]'" },
      "next": ["Mid"] },
    { "name": "Mid",
      "action": { "kind": "Command", "script": "jq -c '.value.m as $m | [range(1000) | {kind: \"Leaf\", value: {m: $m, i: .}}]'" },
      "next": ["Leaf"] },
    { "name": "Leaf",
      "action": { "kind": "Command", "script": "echo '[]'" },
      "next": [] } ] }
EOF

# done count of run $1
done_of() {
  local d
  d=$("$WIZQ" status --run-id "$1" --json 2>/dev/null | jq '.counts.done // 0') || true
  echo "${d:-0}"
}

# Runs a worker on run $1 (size $2) in dir $3 until `done` reaches $4;
# prints its VmHWM in KiB.
work_until() {
  local run=$1 n=$2 dir=$3 until=$4 hwm=0
  MALLOC_CONF=thp:never "$WIZQ" run "$WORK/wf.json" --input "{\"mids\":$((n / 1000))}" \
    --run-id "$run" --dir "$dir" --jobs 4 --quiet 2>>"$WORK/worker.err" &
  local pid=$! last
  # VmHWM is read while the worker lives (the last reading before it ends
  # the run by itself, or before it is stopped).
  while [ "$(done_of "$run")" -lt "$until" ]; do
    if ! last=$(awk '/VmHWM/ {print $2}' /proc/$pid/status 2>/dev/null); then
      wait $pid || true
      if [ "$(done_of "$run")" -lt "$until" ]; then
        echo "worker of $run exited early:" >&2
        cat "$WORK/worker.err" >&2
        exit 1
      fi
      break
    fi
    hwm=$last
    sleep 1
  done
  if last=$(awk '/VmHWM/ {print $2}' /proc/$pid/status 2>/dev/null); then
    hwm=$last
    kill -TERM $pid
  fi
  wait $pid || true
  echo "$hwm"
}

echo "# pg_scale_bench: $(date -u '+%Y-%m-%d %H:%M UTC'), load $(cut -d' ' -f1 /proc/loadavg), $(nproc) cores"
printf '| pending tasks | worker VmHWM KiB | ratio | status server ms | status statements | status wall ms | status --all wall ms |\n'
printf '| --- | --- | --- | --- | --- | --- | --- |\n'
base=""
for n in ${SIZES//,/ }; do
  run="scale$n"
  start=$(date +%s)
  # Root and the Mids: n Leaves pending.
  work_until "$run" "$n" "$WORK/make-$n" $((n / 1000 + 1)) >/dev/null
  made=$(($(date +%s) - start))
  before=$(done_of "$run")
  total=$((n + n / 1000 + 1))
  target=$((before + 10000 < total ? before + 10000 : total))
  hwm=$(work_until "$run" "$n" "$WORK/work-$n" "$target")
  psql -d "$WIZQ_STORE" -qtAc "SELECT pg_stat_statements_reset()" >/dev/null
  t0=$(date +%s%N)
  "$WIZQ" status --run-id "$run" >"$WORK/status-$n.txt"
  t1=$(date +%s%N)
  read -r ms calls < <(psql -d "$WIZQ_STORE" -qtAF ' ' -c \
    "SELECT round(sum(total_exec_time)::numeric, 1), sum(calls)
       FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'")
  "$WIZQ" status --run-id "$run" --all >"$WORK/status-all-$n.txt"
  t2=$(date +%s%N)
  [ -z "$base" ] && base=$hwm
  printf '| %d | %d | %.2f | %s | %s | %d | %d |\n' "$n" "$hwm" \
    "$(echo "$hwm / $base" | bc -l)" "$ms" "$calls" $(((t1 - t0) / 1000000)) \
    $(((t2 - t1) / 1000000))
  echo "  (made in ${made} s; status printed $(wc -l <"$WORK/status-$n.txt") lines)" >&2
done
