#!/bin/sh
# A task of the test workflows: step.sh [-f N] [-n MS] [-R] ROLE [FILTER]
#
# Records its start in the ledger (see lib.sh) under ROLE, or ROLE-<value>
# when the task's value is not {} and there is no -R (the value's letters
# and digits: {"i":3} gives ROLE-i3), naps 0..MS ms (default 20), then prints FILTER (a jq
# program, default `[]`) applied to its {"kind","value"} input and records
# its end. With -f N, attempts 1..N instead record `fail` and exit 1 (-f 99:
# always).
. "$(dirname "$0")/lib.sh"
fail_until=0
nap_ms=20
raw_role=
while getopts f:n:R opt; do
  case $opt in
    f) fail_until=$OPTARG ;;
    n) nap_ms=$OPTARG ;;
    R) raw_role=1 ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
in=$(cat)
value=$(printf '%s' "$in" | jq -c '.value' | tr -dc 'A-Za-z0-9_')
role=$1
[ -n "$raw_role" ] || [ -z "$value" ] || role="$1-$value"
begin "$role"
nap "$nap_ms"
if [ "$WIZQ_ATTEMPT" -le "$fail_until" ]; then
  echo "fail $WIZQ_TASK_ID $WIZQ_ATTEMPT $$ $role" >>"$LEDGER"
  echo "$role fails on purpose (attempt $WIZQ_ATTEMPT)" >&2
  exit 1
fi
out=$(printf '%s' "$in" | jq -c "${2:-[]}")
finish "$role" "$out"
