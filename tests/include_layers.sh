#!/bin/sh
# include_layers.sh SOURCE_DIR: fails when the include graph of the
# source folders has a cycle (docs/ARCHITECTURE.md, "Layers"). An edge
# A -> B is a file under A/ that includes "B/...". Prints the edges, and
# each cycle's folders when there is one. tsort(1) finds the cycles.
set -u
cd "$1" || exit 2
folders="util fs audit queue tasks orchestrator agent mcp interop embed views cli tools"
edges=$(for a in $folders; do
  grep -rhoE '^#include "[a-z_]+/' --include='*.h' --include='*.cc' "$a" |
    sed -E 's/^#include "([a-z_]+)\//\1/' | sort -u |
    while read -r b; do
      case " $folders " in *" $b "*) [ "$b" != "$a" ] && echo "$a $b";; esac
    done
done)
[ -n "$edges" ] || { echo "include_layers: no include between folders found"; exit 1; }
echo "$edges" | sed 's/ / -> /'
out=$(echo "$edges" | tsort 2>&1 >/dev/null)
if [ -n "$out" ]; then
  echo "include_layers: the folders include each other in a cycle:"
  echo "$out"
  exit 1
fi
echo "include_layers: no cycle among $(echo "$edges" | wc -l) edges"
