#!/bin/sh
# Configure: writes <install>/etc/<name>.conf.
#
# Safe to re-run: the file is written whole (temp file, then rename) from
# the task's inputs alone. Nothing that changes from one attempt or run to
# the next (WIZQ_TASK_ID, WIZQ_ATTEMPT, the time) goes into it, so a re-run
# writes the same bytes (task ids depend on the order in which parallel
# tasks finish).
set -eu
value=$(jq -c '.value')
name=$(printf '%s' "$value" | jq -r '.name')
version=$(printf '%s' "$value" | jq -r '.version')
mkdir -p "$WIZQ_INSTALL_DIR/etc"
conf="$WIZQ_INSTALL_DIR/etc/$name.conf"
cat > "$conf.tmp" <<CONF
# written by the wizq installer example
name = $name
version = $version
prefix = $WIZQ_INSTALL_DIR/pkgs/$name
CONF
mv "$conf.tmp" "$conf"
echo '[]'
