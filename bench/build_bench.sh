#!/usr/bin/env bash
# build_bench.sh: the clean build of two commits, one after the other, in
# one invocation (docs/BENCHMARKS.md, "Build time").
#
#   bash bench/build_bench.sh OLD_COMMIT NEW_COMMIT [JOBS=2 in the environment]
#
# Each commit is checked out into a temporary worktree and built the way
# `make build` builds it (Release, -DWIZQ_WERROR=ON), from nothing, with
# ccache off, -j$JOBS. Every compile's wall time is logged through a
# launcher, so the report splits the compile time by room: the library
# (wizq, its directory store), the wizq binary (cli/, views/, crashtest),
# the test binaries, and the rest (torture drivers, benchmarks, replays).
# Prints, per commit, the build's wall, user and system seconds and those
# rooms' compile seconds, then NEW's wall time as a ratio of OLD's. Run it
# on a machine doing nothing else: it measures the machine as much as the
# code. The worktrees and build folders are removed at the end.
set -euo pipefail
OLD=${1:?usage: build_bench.sh OLD_COMMIT NEW_COMMIT}
NEW=${2:?usage: build_bench.sh OLD_COMMIT NEW_COMMIT}
JOBS=${JOBS:-2}
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
W=$(mktemp -d /tmp/build_bench.XXXXXX)
cleanup() {
  for c in old new; do
    git -C "$REPO" worktree remove --force "$W/$c" 2>/dev/null || true
  done
  rm -rf "$W"
}
trap cleanup EXIT

cat >"$W/launch.sh" <<'EOF'
#!/bin/sh
# Runs a compile and appends "<seconds> <object>" to $BUILD_BENCH_LOG.
s=$(date +%s.%N)
"$@"
rc=$?
e=$(date +%s.%N)
obj=""
prev=""
for a in "$@"; do
  [ "$prev" = "-o" ] && obj=$a
  prev=$a
done
echo "$(echo "$e - $s" | bc) $obj" >>"$BUILD_BENCH_LOG"
exit $rc
EOF
chmod +x "$W/launch.sh"

# build NAME COMMIT: prints "NAME wall user sys" and the rooms' lines.
build() {
  local name=$1 commit=$2
  git -C "$REPO" worktree add -q --detach "$W/$name" "$commit"
  cmake -S "$W/$name" -B "$W/$name-build" -DCMAKE_BUILD_TYPE=Release \
    -DWIZQ_WERROR=ON -DCMAKE_CXX_COMPILER_LAUNCHER="$W/launch.sh" >/dev/null
  export BUILD_BENCH_LOG="$W/$name.compiles"
  : >"$BUILD_BENCH_LOG"
  CCACHE_DISABLE=1 /usr/bin/time -o "$W/$name.time" -f "%e %U %S" \
    cmake --build "$W/$name-build" -j"$JOBS" >"$W/$name.log" 2>&1 ||
    { tail -20 "$W/$name.log" >&2; exit 1; }
  read -r wall user sys <"$W/$name.time"
  echo "$name $commit: wall ${wall} s, user ${user} s, sys ${sys} s"
  awk '{
    split($2, a, "/"); t = a[2]; sub(/\.dir$/, "", t)
    if (t ~ /_test$|^wizq_test_util$|^wizq_cli_on_pg$|^wizq_pg_cluster$/) r = "tests"
    else if (t == "wizq" || t == "wizq_dirstore") r = "library"
    else if (t == "wizq_cli") r = "wizq binary"
    else r = "the rest"
    s[r] += $1; n[r]++
  } END {
    for (r in s) printf "  %-12s %7.1f s of compiles in %d files\n", r, s[r], n[r]
  }' "$BUILD_BENCH_LOG" | sort
  eval "${name}_wall=$wall"
}

build old "$OLD"
build new "$NEW"
# shellcheck disable=SC2154  # set by build() through eval
echo "ratio new/old wall: $(echo "scale=2; $new_wall / $old_wall" | bc)"
