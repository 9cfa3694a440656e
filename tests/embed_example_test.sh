#!/bin/sh
# examples/embed built in this tree (the target wizq_embed_example): runs
# unattended, is killed -9 halfway and resumes, and installs every package
# of the mirror once. Usage: embed_example_test.sh BUILD/embed-wizard
set -eu
bin=$1
dir=$(mktemp -d /tmp/wizq-embed-example-XXXXXX)
trap 'rm -rf "$dir"' EXIT
# A first run killed soon after it started (it may or may not have finished).
"$bin" --dir "$dir/install" </dev/null >"$dir/log1" 2>&1 &
pid=$!
sleep 0.1
kill -9 $pid 2>/dev/null || true
wait $pid 2>/dev/null || true
# The second run resumes (or finds the run done) and completes it.
if ! "$bin" --dir "$dir/install" </dev/null >"$dir/log2" 2>&1; then
  cat "$dir/log2"; exit 1
fi
grep -q "completed" "$dir/log2" || { cat "$dir/log2"; exit 1; }
for p in curl git openssl python sqlite zlib; do
  test -d "$dir/install/pkgs/$p" || { echo "missing pkgs/$p"; exit 1; }
  test -f "$dir/install/etc/$p.conf" || { echo "missing etc/$p.conf"; exit 1; }
done
grep -q "packages: curl git openssl python sqlite zlib" "$dir/install/SUMMARY.txt" ||
  { cat "$dir/install/SUMMARY.txt"; exit 1; }
# --yes and a terminal-less stdin answer the same; declining installs nothing.
echo "embed example: ok"
