#!/bin/sh
# The tasks of sweep.jsonc. Usage: task.sh root|work|leaf|hook
#
# Appends to $WIZQ_INSTALL_DIR/ledger (one small O_APPEND write a line, so
# the line order is the order of events):
#   start <task id> <attempt> <pid> <role>
#   end <task id> <attempt> <pid> <role>
#   OVERLAP <task id> <attempt> <pid> <role>  (an earlier attempt still ran)
# An attempt holds an exclusive flock on locks/<task id> while any process
# of its tree lives, so two attempts of one task running at once are caught.
set -eu
ledger="$WIZQ_INSTALL_DIR/ledger"
in=$(cat)
case $1 in
  root) role=root ;;
  work) role="work-$(printf '%s' "$in" | jq -r '.value.i')" ;;
  leaf) role="leaf-$(printf '%s' "$in" | jq -r '.value.k')" ;;
  hook) role="hook-$(printf '%s' "$in" | jq -r '.kind')" ;;
esac
mkdir -p "$WIZQ_INSTALL_DIR/locks"
exec 9>>"$WIZQ_INSTALL_DIR/locks/$WIZQ_TASK_ID"
if ! flock -n 9; then
  echo "OVERLAP $WIZQ_TASK_ID $WIZQ_ATTEMPT $$ $role" >>"$ledger"
  flock 9
fi
echo "start $WIZQ_TASK_ID $WIZQ_ATTEMPT $$ $role" >>"$ledger"
sleep "${SWEEP_NAP:-0.02}"
# A task fails while $WIZQ_INSTALL_DIR/fail-<role> exists (--retry-failed).
if [ -e "$WIZQ_INSTALL_DIR/fail-$role" ]; then
  echo "end $WIZQ_TASK_ID $WIZQ_ATTEMPT $$ $role" >>"$ledger"
  exit 7
fi
case $1 in
  root) out=$(printf '%s' "$in" |
          jq -c '[range(0; .value.n) | {kind: "Work", value: {i: .}}]') ;;
  work) out=$(printf '%s' "$in" | jq -c '.value.i as $i |
          if $i % 2 == 0 then [{kind: "Leaf", value: {k: ($i % 3)}}]
          else [] end') ;;
  *) out='[]' ;;
esac
echo "end $WIZQ_TASK_ID $WIZQ_ATTEMPT $$ $role" >>"$ledger"
printf '%s\n' "$out"
