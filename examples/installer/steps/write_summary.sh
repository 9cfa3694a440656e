#!/bin/sh
# The finally hook of ReadManifest: runs once every package has finished
# (or failed for good) and writes <install>/SUMMARY.txt.
set -eu
cat > /dev/null
out="$WIZQ_INSTALL_DIR/SUMMARY.txt"
{
  echo "wizq installer example: run $WIZQ_RUN_ID"
  for conf in "$WIZQ_INSTALL_DIR"/etc/*.conf; do
    [ -e "$conf" ] || continue
    name=$(sed -n 's/^name = //p' "$conf")
    version=$(sed -n 's/^version = //p' "$conf")
    echo "installed $name $version"
  done
} > "$out.tmp"
mv "$out.tmp" "$out"
echo "summary written to $out" >&2
echo '[]'
