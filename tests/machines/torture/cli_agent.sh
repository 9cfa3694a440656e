#!/bin/bash
# A Pool agent of the machines torture over the command line, as a script
# would drive wizq: `wizq agent take`, the task body on its payload while a
# loop heart-beats every second, then `wizq agent done` with the body's
# output. Nothing ends the body when the lease is lost (a CLI agent has no
# local deadline): an attempt of it that outlives its lease is a
# `late_agent`, not an overlap (tests/machines/torture/history.h). Its
# ledger records say `via: cli`.
#
#   cli_agent.sh WIZQ RUN_ID BODY LEDGER_DIR      (WIZQ_STORE set)
#
# Runs in a machine (tests/machines/machines.sh) with the run's files in
# /mnt; exits 0 once the run finished, as `wizq agent serve` does.
set -u
wizq=$1 run=$2 body=$3 ledger=$4
agent="$(hostname).cli"
at() { "$wizq" agent "$@" --run-id "$run" --dir /mnt; }

# `done`, asked again while the store cannot be reached (a database
# restart, a dropped session), for up to 5 s, as `agent serve` does; a
# refusal (the lease was lost meanwhile: the store drops the late result)
# ends it.
deliver() {
  local until=$((SECONDS + 5)) err
  while :; do
    err=$(at done --task "$1" --lease "$2" --response "$3" 2>&1 >/dev/null) &&
      return
    grep -qE 'lease lost|already|held by another|never taken|timed out|gave it back|invalid' \
      <<<"$err" && return
    ((SECONDS < until)) || return
    sleep 0.3
  done
}

while :; do
  payload=$(at take --wait 3 --agent "$agent" 2>/dev/null)
  code=$?
  if [ "$code" = 5 ]; then
    [ "$(jq -r .status <<<"$payload")" = finished ] && exit 0
    continue
  fi
  if [ "$code" != 0 ]; then  # no run yet, the store out of reach
    sleep 0.5
    continue
  fi
  task=$(jq -r .task_id <<<"$payload")
  lease=$(jq -r .lease <<<"$payload")
  attempt=$(jq -r .attempt <<<"$payload")
  (while sleep 1; do
    at heartbeat --task "$task" --lease "$lease" >/dev/null 2>&1
  done) &
  beats=$!
  out=$(WIZQ_RUN_ID=$run WIZQ_TASK_ID=$task WIZQ_ATTEMPT=$attempt \
    WIZQ_TORTURE_VIA=cli "$body" "$ledger" <<<"$payload")
  kill "$beats" 2>/dev/null
  wait "$beats" 2>/dev/null
  deliver "$task" "$lease" "$out"
done
