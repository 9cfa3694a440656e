# fanout_inputs.sh: the work of the process benchmarks, sourced by
# process_bench.sh and ab_bench.sh with N set, in their work directory:
# workflow.json (a root that prints N Leaf tasks, each Leaf
# `cat >/dev/null; echo []`), children.json (the root's response) and ids
# (1..N, one per line, for xargs).
awk -v n="$N" 'BEGIN {
  printf "[";
  for (i = 1; i <= n; i++) printf "%s{\"kind\":\"Leaf\",\"value\":{\"i\":%d}}", (i > 1 ? "," : ""), i;
  print "]" }' > children.json
cat > workflow.json <<'JSON'
{
  "entrypoint": "Root",
  "steps": [
    { "name": "Root",
      "action": { "kind": "Command", "script": "cat >/dev/null; cat children.json" },
      "next": ["Leaf"] },
    { "name": "Leaf",
      "action": { "kind": "Command", "script": "cat >/dev/null; echo []" },
      "next": [] }
  ]
}
JSON
seq 1 "$N" > ids
