#!/usr/bin/env bash
# process_bench.sh: whole-process benchmark of `wizq run` (make bench;
# docs/BENCHMARKS.md, "Process benchmark", explains the figures).
#
#   bash bench/process_bench.sh WIZQ_BINARY [N=2000] [REPEAT=3]
#
# Three ways to run the same N trivial tasks with 2 at a time:
#   wizq      a workflow whose root task fans out N Leaf tasks; each Leaf is
#             `cat >/dev/null; echo []` (run by wizq as `sh -c`), every
#             transition durable (claims, completions: one fdatasync per
#             group commit). Timed as the whole `wizq run` process, root task,
#             open and close included.
#   xargs     `xargs -P2` running exactly N `sh -c 'cat >/dev/null; echo []'`
#   parallel  GNU `parallel -j2 --joblog` running the same N commands
#   plain     `xargs -P2 -n1 sh -c 'cat >/dev/null; echo []'` with no files
#             of its own: stdin /dev/null, stdout a pipe (the issue-13
#             comparison; the target is wizq_over_plain_xargs <= 1.25 on a
#             quiet machine)
# It also reports wizq's inodes per task (every file and directory its run
# leaves, / tasks) and fsyncs per task (the audit commits: one fdatasync
# each; the spawner syncs nothing while wizq is alive), and one more wizq
# run started right after deleting a previous run's directory (see below).
# To be fair to the baselines, each of their commands gets what a wizq task
# gets: its stdin from a small file holding the task's {"kind","value"} line
# (written before the clock starts, so this favours the baselines) and its
# stdout and stderr in files of their own. Each tool runs REPEAT times,
# interleaved (wizq, xargs, parallel, wizq, ...), in a temporary directory
# next to the binary (the same filesystem as the build, never a tmpfs, so
# wizq's fdatasyncs cost what they cost there); the medians are compared.
# Nothing is deleted until the end: on ext4 without a journal, creating a
# file skips every inode deleted in the last 60 s (360 s while its inode
# table block is dirty; fs/ext4/ialloc.c, recently_deleted), so deleting one
# run's files makes the next run's file creations slow, wizq's as much as
# the baselines' (2 inodes per task each: since the lean attempt files,
# tasks/exec/attempt_files.h, wizq creates <id>.<n>.stdout and .stderr only). The cost of creating one task's files
# is probed before and after, and printed: other processes deleting files
# on the same filesystem (builds) have the same effect.
#
# The MACHINE line (bench/machine_probe.sh: fdatasync latency, load, cores,
# measured in the work directory) is printed before the runs and after them.
# Last line: RESULT wizq_over_xargs=<ratio> parallel_over_wizq=<ratio>
#            wizq_over_plain_xargs=<ratio>
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)

WIZQ=${1:?usage: process_bench.sh WIZQ_BINARY [N] [REPEAT]}
N=${2:-2000}
REPEAT=${3:-3}
JOBS=2

WIZQ=$(cd "$(dirname "$WIZQ")" && pwd)/$(basename "$WIZQ")
[ -x "$WIZQ" ] || { echo "process_bench: $WIZQ is not executable" >&2; exit 2; }
for tool in xargs parallel awk; do
  command -v "$tool" >/dev/null || {
    echo "process_bench: $tool is missing (Debian: apt-get install parallel findutils mawk)" >&2
    exit 2
  }
done
. "$BENCH_DIR/machine_probe.sh"

WORK=$(mktemp -d "$(dirname "$WIZQ")/process-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"

fs_type=$(df -PT "$WORK" | awk 'NR == 2 { print $2 " on " $1 }')
echo "process_bench: N=$N tasks, $JOBS jobs, median of $REPEAT; in $WORK ($fs_type)"
machine_line "$WORK"
dev=$(df -P "$WORK" | awk 'NR == 2 { print $1 }')
if [ "$(cat "/sys/fs/ext4/${dev#/dev/}/journal_task" 2>/dev/null)" = "<none>" ]; then
  echo "process_bench: note: $dev is ext4 without a journal: fdatasync is cheaper than on a journaled fs"
fi

# --- the inputs ---------------------------------------------------------------
# The workflow, the root's response and the ids (bench/fanout_inputs.sh).
. "$BENCH_DIR/fanout_inputs.sh"
# The baselines' stdin files (wizq's tasks read theirs from a memfd).
mkdir in
awk -v n="$N" 'BEGIN {
  for (i = 1; i <= n; i++) printf "{\"kind\":\"Leaf\",\"value\":{\"i\":%d}}\n", i > ("in/" i) }'

# One task of the baselines: exactly one `sh -c`, stdin from its file,
# stdout and stderr to files of their own (in a fresh out directory per run,
# the link `out` points to), like a wizq task.
TASK='exec <"in/$1" >"out/$1.stdout" 2>"out/$1.stderr"; cat >/dev/null; echo []'
fresh_out() {
  mkdir "$WORK/out-$1"
  ln -sfn "out-$1" out
}

now_us() { local t=${EPOCHREALTIME/./}; echo "$t"; }

declare -a T_WIZQ=() T_XARGS=() T_PAR=() T_PLAIN=() COMMITS=() EVENTS=() INODES=()

run_wizq() {
  local dir=$WORK/wizq-$1
  mkdir "$dir"
  local t0 t1
  t0=$(now_us)
  "$WIZQ" run workflow.json --dir "$dir" --jobs "$JOBS" --quiet
  t1=$(now_us)
  local done_count
  done_count=$("$WIZQ" status --dir "$dir" --json | grep -o '"done":[0-9]*' | head -1 | cut -d: -f2)
  if [ "$done_count" != "$((N + 1))" ]; then
    echo "process_bench: wizq finished $done_count tasks, expected $((N + 1))" >&2
    exit 1
  fi
  T_WIZQ+=($((t1 - t0)))
  COMMITS+=($(grep -c '"commit":true' "$dir/.wizard/audit.jsonl"))
  EVENTS+=($(wc -l < "$dir/.wizard/audit.jsonl"))
  INODES+=($(find "$dir" | wc -l))
}

run_plain() {
  local t0 t1
  t0=$(now_us)
  xargs -P "$JOBS" -n 1 sh -c 'cat >/dev/null; echo []' sh < ids | cat >/dev/null
  t1=$(now_us)
  T_PLAIN+=($((t1 - t0)))
}

check_outputs() {
  local n
  n=$( (grep -lx '\[\]' out/*.stdout 2>/dev/null || true) | wc -l)
  if [ "$n" != "$N" ]; then
    echo "process_bench: $1 produced $n good outputs, expected $N" >&2
    exit 1
  fi
}

run_xargs() {
  fresh_out "xargs-$1"
  local t0 t1
  t0=$(now_us)
  xargs -P "$JOBS" -n 1 sh -c "$TASK" sh < ids
  t1=$(now_us)
  check_outputs xargs
  T_XARGS+=($((t1 - t0)))
}

run_parallel() {
  fresh_out "parallel-$1"
  local t0 t1
  t0=$(now_us)
  parallel --will-cite -j "$JOBS" --joblog "$WORK/joblog" -q sh -c "$TASK" sh {} < ids
  t1=$(now_us)
  check_outputs parallel
  T_PAR+=($((t1 - t0)))
}

# How much creating a task's files costs right now: 200 x 2 files, what
# wizq (and each baseline) creates per task. Slow file creation (ext4
# without a journal skipping recently deleted inodes, other processes' I/O)
# slows every tool, so it is printed with the results.
probe_creates() {
  local dir=$WORK/probe-$1 t0 t1 i
  mkdir "$dir"
  t0=$(now_us)
  for ((i = 1; i <= 200; i++)); do
    : >"$dir/$i.1.stdout"; : >"$dir/$i.1.stderr"
  done
  t1=$(now_us)
  echo "process_bench: file creation probe ($1): $(( (t1 - t0) / 200 )) us per 2 files"
}

median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
ms() { awk -v us="$1" 'BEGIN { printf "%.0f", us / 1000 }'; }

# A warm-up of each (page cache, parallel's perl startup), not counted.
probe_creates before
run_xargs warmup
run_parallel warmup
run_plain warmup
T_XARGS=()
T_PAR=()
T_PLAIN=()

for ((r = 1; r <= REPEAT; r++)); do
  run_wizq "$r"
  run_xargs "$r"
  run_parallel "$r"
  run_plain "$r"
  echo "process_bench: run $r/$REPEAT: wizq $(ms "${T_WIZQ[-1]}") ms" \
       "($((N + 1)) tasks, ${COMMITS[-1]} commits), xargs $(ms "${T_XARGS[-1]}") ms," \
       "parallel $(ms "${T_PAR[-1]}") ms, plain xargs $(ms "${T_PLAIN[-1]}") ms"
done

# Right after deleting a run's directory (ext4 without a journal skips the
# inodes deleted in the last 60 s when it creates files): one more wizq run.
rm -rf "$WORK/wizq-1"
sync
T_SAVE=("${T_WIZQ[@]}")
run_wizq after-delete
AFTER_DELETE=${T_WIZQ[-1]}
T_WIZQ=("${T_SAVE[@]}")
echo "process_bench: wizq right after deleting a run directory: $(ms "$AFTER_DELETE") ms"


W=$(median "${T_WIZQ[@]}")
X=$(median "${T_XARGS[@]}")
P=$(median "${T_PAR[@]}")
L=$(median "${T_PLAIN[@]}")
I=$(median "${INODES[@]}")
C=$(median "${COMMITS[@]}")
E=$(median "${EVENTS[@]}")
probe_creates after
machine_line "$WORK"
awk -v w="$W" -v x="$X" -v p="$P" -v l="$L" -v i="$I" -v a="$AFTER_DELETE" \
    -v n="$N" -v c="$C" -v e="$E" 'BEGIN {
  printf "wizq      %8.0f ms  %7.1f us/task\n", w / 1000, w / n;
  printf "xargs     %8.0f ms  %7.1f us/task\n", x / 1000, x / n;
  printf "parallel  %8.0f ms  %7.1f us/task\n", p / 1000, p / n;
  printf "plain     %8.0f ms  %7.1f us/task  (xargs, no files)\n", l / 1000, l / n;
  printf "wizq after deleting a run: %.0f ms (%.2fx the median)\n", a / 1000, a / w;
  printf "wizq inodes per task: %.2f; fsyncs per task: %.3f (audit commits)\n", i / (n + 1), c / (n + 1);
  printf "wizq overhead over xargs: %.1f us/task\n", (w - x) / n;
  printf "wizq fdatasyncs (commit lines in audit.jsonl): %d; %.2f tasks/commit, %.2f audit events/commit\n",
         c, (n + 1) / c, e / c;
  printf "RESULT wizq_over_xargs=%.2f parallel_over_wizq=%.2f wizq_over_plain_xargs=%.2f\n", w / x, p / w, w / l }'
