#!/bin/sh
# Download: copies the package from the mirror into <install>/downloads/,
# through a .part file renamed into place, so a kill never leaves half a
# download under the final name.
#
# Safe to re-run (`wizq crashtest` checks it): a power cut can kill a task
# after its side effects and before wizq records its completion, and the
# task then runs again. Every write here gives the same result the second
# time:
#  - the download: a temp file named by WIZQ_IDEMPOTENCY_KEY (stable across
#    attempts and resumes of this task, unique to it), renamed over the
#    final name: a re-run replaces it with the same bytes;
#  - downloads.log: read before write. Appending a line (`echo >> log`)
#    would add it again on every re-run; instead the new content is the
#    old lines plus this one, deduplicated and sorted, so a re-run changes
#    nothing (and the file does not depend on which download finished
#    first). The lock keeps parallel downloads from losing each other's
#    lines.
#  - A side effect that cannot be read back (a notification, a payment, a
#    remote API call) is guarded by the key instead: skip it if a marker
#    named by the key exists, and have the remote side deduplicate on the
#    key, since the task can still die between the effect and the marker:
#      marker="$WIZQ_INSTALL_DIR/.done/$WIZQ_IDEMPOTENCY_KEY"
#      if [ ! -e "$marker" ]; then
#        notify --idempotency-key "$WIZQ_IDEMPOTENCY_KEY" ...
#        mkdir -p "${marker%/*}" && : > "$marker"
#      fi
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
log="$WIZQ_INSTALL_DIR/downloads.log"
flock "$WIZQ_INSTALL_DIR/downloads" sh -c '
  { cat "$1" 2>/dev/null || true; echo "$2"; } | LC_ALL=C sort -u > "$1.tmp"
  mv "$1.tmp" "$1"' sh "$log" "$file"
printf '[{"kind":"Verify","value":%s}]\n' "$value"
