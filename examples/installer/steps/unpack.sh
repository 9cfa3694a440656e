#!/bin/sh
# Unpack: extracts into a scratch directory, then renames it into
# <install>/pkgs/<name>, replacing what an interrupted attempt left.
set -eu
value=$(jq -c '.value')
file=$(printf '%s' "$value" | jq -r '.file')
name=$(printf '%s' "$value" | jq -r '.name')
pkgs="$WIZQ_INSTALL_DIR/pkgs"
tmp="$pkgs/.unpack-$WIZQ_IDEMPOTENCY_KEY"
mkdir -p "$pkgs"
rm -rf "$tmp"
mkdir "$tmp"
tar -xzf "$WIZQ_INSTALL_DIR/downloads/$file" -C "$tmp"
rm -rf "$pkgs/$name"
mv "$tmp/$name" "$pkgs/$name"
rmdir "$tmp"
printf '[{"kind":"Configure","value":%s}]\n' "$value"
