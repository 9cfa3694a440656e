#!/bin/sh
# ListFiles: one Review task per C file under src/, in name order.
set -eu
ls src/*.c | jq -R '{kind: "Review", value: {file: .}}' | jq -s -c .
