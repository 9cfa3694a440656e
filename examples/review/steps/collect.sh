#!/bin/sh
# The finally hook of ListFiles: every review is in; write REVIEW.md.
set -eu
cd "$WIZQ_INSTALL_DIR"
{
  echo "# Review"
  echo
  for f in reviews/*.json; do
    jq -r '"- \(.file): \(.verdict) (\(.notes // ""))"' "$f"
  done
} > REVIEW.md.tmp
mv REVIEW.md.tmp REVIEW.md
echo '[]'
