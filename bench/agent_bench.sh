#!/usr/bin/env bash
# agent_bench.sh: agents working a run of N Pool tasks through the CLI
# (docs/BENCHMARKS.md, "Agent benchmark").
#
#   bash bench/agent_bench.sh WIZQ_BINARY [N=2000] [AGENTS="1 4"]
#
# For each agent count A: a fresh run whose root Command fans out N Pool
# tasks (`wizq run` waits for agents meanwhile), then A shell agents, each a
# loop of `wizq agent take` + `wizq agent done --response []` until take
# says the run has finished. Every call is a separate process that opens
# the run, transacts once (fdatasync) and exits: what a script or an LLM
# agent's tool call costs. Timed from the first take to the run's end.
# The install directory is next to the binary (the build's filesystem,
# not a tmpfs). The MACHINE line (bench/machine_probe.sh: fdatasync latency,
# load, cores, measured there) is printed before the first agent count and
# after the last.
#
# One line per agent count:
#   RESULT agents=<A> tasks=<N> seconds=<s> tasks_per_s=<r> median_take_done_ms=<m>
# where take->done is one agent's take start to its done's end.
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
WIZQ=$(realpath "$1")
N=${2:-2000}
AGENTS=${3:-"1 4"}
. "$BENCH_DIR/machine_probe.sh"
ROOT=$(mktemp -d "$(dirname "$WIZQ")/agent-bench-XXXXXX")
trap 'rm -rf "$ROOT"' EXIT
machine_line "$ROOT"

now_ms() { date +%s%3N; }

agent() {  # $1 dir, $2 times file
  local dir=$1 times=$2 out t0 t1 id lease
  while :; do
    t0=$(now_ms)
    out=$("$WIZQ" agent take --dir "$dir" --wait 5) || {
      case $out in *finished*) return 0 ;; esac
      continue
    }
    id=${out#*\"task_id\":}; id=${id%%,*}
    lease=${out#*\"lease\":\"}; lease=${lease%%\"*}
    "$WIZQ" agent done --dir "$dir" --task "$id" --lease "$lease" \
      --response '[]' >/dev/null
    t1=$(now_ms)
    echo $((t1 - t0)) >> "$times"
  done
}

for A in $AGENTS; do
  dir="$ROOT/run-$A"
  mkdir -p "$dir"
  cat > "$dir/wf.json" <<JSON
{"entrypoint": "Root",
 "steps": [
  {"name": "Root", "next": ["Work"], "action": {"kind": "Command",
   "script": "seq 1 $N | jq -c '{kind: \"Work\", value: .}' | jq -s -c ."}},
  {"name": "Work", "action": {"kind": "Pool", "instructions": "Nothing."}}]}
JSON
  "$WIZQ" run "$dir/wf.json" --dir "$dir/install" --quiet &
  run_pid=$!
  until [ -f "$dir/install/.wizard/queue.json" ] &&
        "$WIZQ" status --dir "$dir/install" --json | grep -q "\"pending\":$N"; do
    sleep 0.1
  done
  start=$(now_ms)
  pids=()
  for i in $(seq 1 "$A"); do
    agent "$dir/install" "$dir/times.$i" &
    pids+=($!)
  done
  wait "${pids[@]}"
  wait "$run_pid"
  end=$(now_ms)
  cat "$dir"/times.* | sort -n > "$dir/times"
  count=$(wc -l < "$dir/times")
  median=$(sed -n "$(( (count + 1) / 2 ))p" "$dir/times")
  secs=$(awk -v ms=$((end - start)) 'BEGIN { printf "%.1f", ms / 1000 }')
  rate=$(awk -v n="$count" -v ms=$((end - start)) 'BEGIN { printf "%.0f", n * 1000 / ms }')
  echo "RESULT agents=$A tasks=$count seconds=$secs tasks_per_s=$rate median_take_done_ms=$median"
done
machine_line "$ROOT"
