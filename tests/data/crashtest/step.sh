#!/bin/sh
# A step of the crashtest fixtures (tests/crashtest_test.cc):
#   step.sh NAME NEXT [write|append|stamp]
# records NAME in the install directory and prints a task of each step of
# NEXT, a comma-separated list ("" ends the chain).
#   write   writes <install>/NAME.done whole (temp file + rename): safe to
#           re-run, the second run writes the same bytes;
#   append  appends NAME to <install>/steps.log: NOT safe to re-run, each
#           run adds a line;
#   stamp   writes the current time into <install>/NAME.stamp: differs in
#           every run, re-run or not;
#   chmod   writes NAME.done like `write`, mode 0644 on the first attempt
#           and 0600 on a later one: a re-run changes only the mode;
#   slow    sleeps a second, then writes like `write` (a task still
#           running when another one's result is committed).
set -eu
cat > /dev/null
name=$1
next=$2
mode=${3:-write}
if [ "$mode" = slow ]; then
  sleep 1
  mode=write
fi
case "$mode" in
  write)
    printf '%s\n' "$name" > "$WIZQ_INSTALL_DIR/$name.tmp"
    mv "$WIZQ_INSTALL_DIR/$name.tmp" "$WIZQ_INSTALL_DIR/$name.done" ;;
  append)
    echo "$name" >> "$WIZQ_INSTALL_DIR/steps.log" ;;
  stamp)
    date +%s%N > "$WIZQ_INSTALL_DIR/$name.stamp" ;;
  chmod)
    printf '%s\n' "$name" > "$WIZQ_INSTALL_DIR/$name.done"
    if [ "$WIZQ_ATTEMPT" = 1 ]; then mode=644; else mode=600; fi
    chmod "$mode" "$WIZQ_INSTALL_DIR/$name.done" ;;
esac
out=
IFS=,
for step in $next; do
  out="$out${out:+,}{\"kind\":\"$step\",\"value\":{}}"
done
echo "[$out]"
