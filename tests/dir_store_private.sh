#!/bin/sh
# dir_store_private.sh SOURCE_DIR CXX: the directory store's private
# headers (queue/dir/ but dir_open.h, and audit/ but log_format.h, the
# event line's format the codec shares) do not compile outside
# its library (queue/dir/dir_private.h), and compile inside it. Each
# header is compiled alone, -fsyntax-only, once without and once with
# WIZQ_DIR_STORE_INTERNAL.
set -u
src=$1
cxx=$2
fail=0
n=0
for h in "$src"/queue/dir/*.h "$src"/audit/*.h; do
  rel=${h#"$src"/}
  case $rel in
    queue/dir/dir_open.h|queue/dir/dir_private.h|audit/log_format.h) continue;;
  esac
  n=$((n + 1))
  out=$(echo "#include \"$rel\"" | "$cxx" -std=c++17 -fsyntax-only \
    -I "$src" -I "$src/include" -x c++ - 2>&1)
  if [ $? -eq 0 ] || ! echo "$out" | grep -q 'private to the directory store'; then
    echo "FAIL: $rel compiles outside the directory store:"
    echo "$out" | head -5
    fail=1
  fi
  out=$(echo "#include \"$rel\"" | "$cxx" -std=c++17 -fsyntax-only \
    -DWIZQ_DIR_STORE_INTERNAL -I "$src" -I "$src/include" -x c++ - 2>&1)
  if [ $? -ne 0 ]; then
    echo "FAIL: $rel does not compile inside the directory store:"
    echo "$out" | head -5
    fail=1
  fi
done
[ "$n" -gt 5 ] || { echo "FAIL: only $n private headers found"; exit 1; }
[ "$fail" -eq 0 ] && echo "dir_store_private: $n headers refused outside, accepted inside"
exit $fail
