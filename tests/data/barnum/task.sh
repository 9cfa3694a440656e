#!/bin/sh
# A task of the Barnum interop tests (tests/barnum_cli_test.cc).
#   task.sh [finally]
# Appends "<role> [<step>,<value>]" to $WIZQ_INSTALL_DIR/ledger (role: run,
# or finally for a hook), the side-effect ledger the tests read; then, for
# its value:
#   wait_for PATH  waits (up to 60 s) until PATH exists (a task in flight
#                  while the test kills wizq with SIGKILL);
#   fail_times N   attempts 1..N exit 1 ($WIZQ_ATTEMPT);
#   children       printed as the response (a hook prints hook_children).
set -eu
in=$(cat)
role=${1:-run}
printf '%s %s\n' "$role" "$(printf '%s' "$in" | jq -c '[.kind, .value]')" \
  >>"$WIZQ_INSTALL_DIR/ledger"
w=$(printf '%s' "$in" | jq -r '.value.wait_for // empty')
i=0
while [ -n "$w" ] && [ ! -e "$w" ] && [ $i -lt 1200 ]; do
  sleep 0.05
  i=$((i + 1))
done
if [ "$role" = finally ]; then
  printf '%s' "$in" | jq -c '.value.hook_children // []'
  exit 0
fi
f=$(printf '%s' "$in" | jq -r '.value.fail_times // 0')
if [ "$WIZQ_ATTEMPT" -le "$f" ]; then
  echo "fails on purpose (attempt $WIZQ_ATTEMPT)" >&2
  exit 1
fi
printf '%s' "$in" | jq -c '.value.children // []'
