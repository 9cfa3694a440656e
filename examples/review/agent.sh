#!/bin/sh
# A deterministic scripted agent for the Review step (no network, no model):
# reads the payload wizq gives an agent on stdin (SPEC §9: task,
# instructions, timeout_seconds, task_id, ...), "reviews" the file as
# review.md asks, and prints its response: one Record task.
#
# WIZQ_REVIEW_AGENT_DELAY (seconds, default 0) makes it slow, for trying
# out kill -9 and resume.
set -eu
payload=$(cat)
here=$(cd "$(dirname "$0")" && pwd)
file=$(printf '%s' "$payload" | jq -r .task.value.file)
sleep "${WIZQ_REVIEW_AGENT_DELAY:-0}"
todo=$(grep -n TODO "$here/$file" | cut -d: -f1 | paste -sd, - || true)
if [ -n "$todo" ]; then
  verdict=request_changes notes="TODO left on line(s) $todo"
else
  verdict=approve notes="$(wc -l < "$here/$file" | tr -d ' ') lines, no TODO"
fi
jq -cn --arg file "$file" --arg verdict "$verdict" --arg notes "$notes" \
  '[{kind: "Record", value: {file: $file, verdict: $verdict, notes: $notes}}]'
