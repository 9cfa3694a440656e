#!/usr/bin/env bash
# ab_bench.sh: A/B comparison of wizq builds on the process benchmark's
# work (docs/BENCHMARKS.md, "A/B of builds").
#
#   bash bench/ab_bench.sh DIR WIZQ_BINARY... [N=2000 R=3 in the environment]
#
# Each binary runs the process benchmark's workflow (a root that fans out N
# `cat >/dev/null; echo []` tasks, --jobs 2 --quiet), alternately with the
# others and with plain `xargs -P2 -n1 sh -c 'cat >/dev/null; echo []'`, R
# rounds, each in a fresh directory under DIR; nothing is deleted during
# the series (a deletion slows every file creation after it on ext4 without
# a journal for up to 6 minutes: docs/BENCHMARKS.md, "The recently-deleted
# effect"). Use a DIR on a filesystem nothing else deletes on, e.g. a
# loop-mounted ext4:
#
#   truncate -s 3G /tmp/bench.img && mkfs.ext4 -q -F -O ^has_journal /tmp/bench.img
#   mkdir -p /mnt/bench && mount -o loop /tmp/bench.img /mnt/bench
#
# Prints the MACHINE line (bench/machine_probe.sh: fdatasync latency, load,
# cores, measured in DIR; the probe comes from build/ or $MACHINE_PROBE)
# before the rounds and after them, then each binary's median and its ratio
# to plain xargs's. DIR is left for the caller to remove (later).
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)

DIR=${1:?usage: ab_bench.sh DIR WIZQ_BINARY...}
shift
[ $# -ge 1 ] || { echo "ab_bench: no binary given" >&2; exit 2; }
N=${N:-2000}
R=${R:-3}
BINS=()
for b in "$@"; do
  [ -x "$b" ] || { echo "ab_bench: $b is not executable" >&2; exit 2; }
  BINS+=("$(cd "$(dirname "$b")" && pwd)/$(basename "$b")")
done
set -- "${BINS[@]}"
. "$BENCH_DIR/machine_probe.sh"
W=$(mktemp -d "$DIR/ab.XXXXXX")
cd "$W"
machine_line "$W"

# The workflow, the root's response and the ids (bench/fanout_inputs.sh).
. "$BENCH_DIR/fanout_inputs.sh"

now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }
declare -A T
for r in $(seq "$R"); do
  for b in "$@"; do
    d="$W/run-$r-$(basename "$b")"
    mkdir "$d"
    t0=$(now_ms)
    "$b" run workflow.json --dir "$d" --jobs 2 --quiet
    T[$b]+="$(($(now_ms) - t0)) "
  done
  t0=$(now_ms)
  xargs -P 2 -n 1 sh -c 'cat >/dev/null; echo []' sh < ids | cat >/dev/null
  T[plain]+="$(($(now_ms) - t0)) "
done

machine_line "$W"

median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
plain=$(median "${T[plain]}")
echo "plain xargs: ${T[plain]}ms, median $plain ms"
for b in "$@"; do
  m=$(median "${T[$b]}")
  echo "$b: ${T[$b]}ms, median $m ms, ratio $(awk -v a="$m" -v b="$plain" 'BEGIN { printf "%.2f", a / b }')"
done
echo "ab_bench: runs left in $W"
