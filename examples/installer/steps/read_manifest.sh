#!/bin/sh
# ReadManifest: reads <mirror>/manifest.json and asks ConfirmInstall
# whether to install its packages (StartInstall then fans out one Download
# per package). Input: {"mirror": "<dir, relative to the workflow>",
# "delay": s}.
set -eu
input=$(cat)
mirror=$(printf '%s' "$input" | jq -r '.value.mirror // "mirror"')
delay=$(printf '%s' "$input" | jq -r '.value.delay // 0.3')
mirror=$(cd "$mirror" && pwd)
echo "manifest: $mirror/manifest.json" >&2
jq --arg mirror "$mirror" --argjson delay "$delay" \
  '[{kind: "ConfirmInstall", value: {packages: [.packages[] | (. + {mirror: $mirror, delay: $delay})]}}]' \
  "$mirror/manifest.json"
