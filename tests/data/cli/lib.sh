# Sourced by the scripts of the wizq integration tests' workflows
# (tests/wizq_cli_test.cc, tests/wizq_crash_test.cc).
#
# Every task records its side effects in $WIZQ_INSTALL_DIR/ledger, one line
# per event, appended with `>>` (a small O_APPEND write is atomic), so the
# line order is the order in which things happened:
#   start <task id> <attempt> <pid> <role>
#   end <task id> <attempt> <pid> <role>
#   OVERLAP <task id> <attempt> <pid> <role>   (an earlier attempt still ran)
# An attempt holds an exclusive flock on locks/<task id> for as long as any
# process of its tree lives (the descriptor is inherited), so an attempt that
# starts while an earlier one of the same task still runs is caught.
set -eu
LEDGER="$WIZQ_INSTALL_DIR/ledger"

# begin ROLE: takes the task's lock and records the start.
begin() {
  mkdir -p "$WIZQ_INSTALL_DIR/locks"
  exec 9>>"$WIZQ_INSTALL_DIR/locks/$WIZQ_TASK_ID"
  if ! flock -n 9; then
    echo "OVERLAP $WIZQ_TASK_ID $WIZQ_ATTEMPT $$ $1" >>"$LEDGER"
    flock 9
  fi
  echo "start $WIZQ_TASK_ID $WIZQ_ATTEMPT $$ $1" >>"$LEDGER"
}

# finish ROLE RESPONSE: records the end and prints the response.
finish() {
  echo "end $WIZQ_TASK_ID $WIZQ_ATTEMPT $$ $1" >>"$LEDGER"
  printf '%s\n' "$2"
}

# nap MAX_MS: sleeps a random 0..MAX_MS milliseconds, plus
# $NAP_FLOOR_MS (default 0; wizq passes its environment on to tasks).
nap() {
  ms=$(($(od -An -N2 -tu2 /dev/urandom) % ($1 + 1) + ${NAP_FLOOR_MS:-0}))
  sleep "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))"
}
