#!/bin/sh
# Download: copies the package from the mirror into <install>/downloads/,
# through a .part file renamed into place, so a kill never leaves half a
# download under the final name.
set -eu
value=$(jq -c '.value')
file=$(printf '%s' "$value" | jq -r '.file')
mirror=$(printf '%s' "$value" | jq -r '.mirror')
delay=$(printf '%s' "$value" | jq -r '.delay // 0')
mkdir -p "$WIZQ_INSTALL_DIR/downloads"
dest="$WIZQ_INSTALL_DIR/downloads/$file"
sleep "$delay"   # a slow network
cp "$mirror/$file" "$dest.part.$WIZQ_IDEMPOTENCY_KEY"
mv "$dest.part.$WIZQ_IDEMPOTENCY_KEY" "$dest"
echo "downloaded $file (attempt $WIZQ_ATTEMPT)" >&2
echo "$file" >> "$WIZQ_INSTALL_DIR/downloads.log"
printf '[{"kind":"Verify","value":%s}]\n' "$value"
