#!/bin/sh
# StartInstall: gets ConfirmInstall's answer ({"answer": true|false,
# "value": {"packages": [...]}}) and fans out one Download per package, or
# nothing when the answer was no (the run then completes having written
# nothing but its summary).
set -eu
input=$(cat)
if [ "$(printf '%s' "$input" | jq -r '.value.answer')" != "true" ]; then
  echo "not installing: the answer was no" >&2
  echo '[]'
  exit 0
fi
printf '%s' "$input" | jq -c '[.value.value.packages[] | {kind: "Download", value: .}]'
