#!/bin/sh
# The tasks of fanout.jsonc. Usage: task.sh root|work|group|leaf|hook
# Reads {"kind","value"} on stdin; the role in the ledger names the task
# (work-3, leaf-7, hook-Group-2, ...).
. "$(dirname "$0")/../lib.sh"
in=$(cat)
step=$(printf '%s' "$in" | jq -r '.kind')
case $1 in
  root) role=root ;;
  work) role="work-$(printf '%s' "$in" | jq -r '.value.i')" ;;
  group) role="group-$(printf '%s' "$in" | jq -r '.value.g')" ;;
  leaf) role="leaf-$(printf '%s' "$in" | jq -r '.value.k')" ;;
  hook) role="hook-$step-$(printf '%s' "$in" | jq -c '.value' | tr -dc 'a-z0-9')" ;;
esac
begin "$role"
nap "${FANOUT_NAP_MS:-50}"
case $1 in
  # n Work tasks and n/9 Group tasks.
  root) out=$(printf '%s' "$in" | jq -c '.value.n as $n |
          [range(0; $n) | {kind: "Work", value: {i: .}}] +
          [range(0; ($n / 9 | floor)) | {kind: "Group", value: {g: .}}]') ;;
  # Every third Work spawns two Leaves; Leaves are shared between Works, so
  # most of them are deduplicated.
  work) out=$(printf '%s' "$in" | jq -c '.value.i as $i |
          if $i % 3 == 0 then
            [{kind: "Leaf", value: {k: ($i % 10)}},
             {kind: "Leaf", value: {k: (($i + 5) % 10)}}]
          else [] end') ;;
  group) out=$(printf '%s' "$in" | jq -c '.value.g as $g |
           [{kind: "Leaf", value: {k: (100 + $g)}},
            {kind: "Leaf", value: {k: (200 + $g)}}]') ;;
  *) out='[]' ;;
esac
finish "$role" "$out"
