#!/bin/sh
# A step of inject.jsonc. Usage: pass.sh [NEXT-STEP]
# Keeps what arrived on stdin in $WIZQ_INSTALL_DIR/seen/<task id>.stdin and
# the raw bytes of .value.s in <task id>.s (jq -j: no added newline), then
# passes its value on, unchanged, to NEXT-STEP (none: the chain ends).
set -eu
seen="$WIZQ_INSTALL_DIR/seen"
mkdir -p "$seen"
cat >"$seen/$WIZQ_TASK_ID.stdin"
jq -j '.value.s' <"$seen/$WIZQ_TASK_ID.stdin" >"$seen/$WIZQ_TASK_ID.s"
printf '%s' "$WIZQ_STEP" >"$seen/$WIZQ_TASK_ID.step"
if [ $# -gt 0 ]; then
  jq -c --arg k "$1" '[{kind: $k, value: .value}]' <"$seen/$WIZQ_TASK_ID.stdin"
else
  echo '[]'
fi
