#!/bin/sh
# Verify: checks the downloaded file's sha256; a mismatch fails the task.
set -eu
value=$(jq -c '.value')
file=$(printf '%s' "$value" | jq -r '.file')
want=$(printf '%s' "$value" | jq -r '.sha256')
got=$(sha256sum "$WIZQ_INSTALL_DIR/downloads/$file" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then
  echo "checksum mismatch for $file: got $got, want $want" >&2
  exit 1
fi
printf '[{"kind":"Unpack","value":%s}]\n' "$value"
