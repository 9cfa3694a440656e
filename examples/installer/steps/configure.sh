#!/bin/sh
# Configure: writes <install>/etc/<name>.conf.
set -eu
value=$(jq -c '.value')
name=$(printf '%s' "$value" | jq -r '.name')
version=$(printf '%s' "$value" | jq -r '.version')
mkdir -p "$WIZQ_INSTALL_DIR/etc"
conf="$WIZQ_INSTALL_DIR/etc/$name.conf"
cat > "$conf.tmp" <<CONF
# written by the wizq installer example (task $WIZQ_TASK_ID)
name = $name
version = $version
prefix = $WIZQ_INSTALL_DIR/pkgs/$name
CONF
mv "$conf.tmp" "$conf"
echo '[]'
