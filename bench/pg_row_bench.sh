#!/bin/bash
# What one transaction's row writes cost on the PostgreSQL store's own
# tasks table, against the bare queue's (docs/BENCHMARKS.md, "PostgreSQL
# store", "Where a transaction's time goes").
#
#   bash bench/pg_row_bench.sh [BUILD_DIR] [ROWS] [SECONDS] [ROUNDS]
#
# Starts a throwaway cluster of its own (build/with_pg_cluster, fsync on,
# synchronous_commit on), makes the store's schema with `wizq db migrate`
# and fills its tasks table with ROWS (default 100000) tasks of one run,
# and the baseline's table (id, state; a partial index on the pending
# rows, as bench/pg_bench.cc's) alike. Then pgbench (one client, prepared
# statements, each transaction in one pipeline as the store sends it)
# runs, in turn for ROUNDS rounds of SECONDS each:
#   trivial  BEGIN, 16 x SELECT 1, COMMIT: the protocol's floor;
#   bare     the baseline's transaction: 8 rows set done and 8 claimed, in
#            two UPDATEs (8 rows each, by id);
#   wide     the store's: 16 fenced UPDATEs of a whole task row by its key
#            (8 claimed, 8 done), as queue/pg/pg_work.cc's TaskWrite;
#   wide-hot the same on a copy of the table without the indexes whose
#            predicate reads `state` or `hook_due` (tasks_ready,
#            tasks_in_progress, tasks_hooks_due), so each write is HOT;
#   narrow   16 fenced UPDATEs of a narrow row of the claimable state only
#            (state, attempt, claim: 8 columns; its key and the two
#            partial indexes by state), the wide row left alone: a
#            redesign's lower bound;
#   narrow-8 the same 16 narrow rows in two statements of 8 (UPDATE ...
#            FROM (VALUES ...), each row still fenced).
# Prints each one's mean latency a transaction (ms), the median over the
# rounds, and wide ÷ bare, wide-hot ÷ bare.
set -euo pipefail
BUILD=${1:-build}
ROWS=${2:-100000}
SECONDS_EACH=${3:-8}
ROUNDS=${4:-3}
if [ -z "${WIZQ_STORE:-}" ]; then
  exec "$BUILD/with_pg_cluster" --fsync --set "synchronous_commit = on" \
    bash "$0" "$BUILD" "$ROWS" "$SECONDS_EACH" "$ROUNDS"
fi
PGBENCH=$(printf '%s\n' /usr/lib/postgresql/*/bin/pgbench | sort -V | tail -1)
WORK=$(mktemp -d /tmp/wizq-pg-row-XXXXXX)
chmod 755 "$WORK"
trap 'rm -rf "$WORK"' EXIT
"$BUILD/wizq" db migrate --store "$WIZQ_STORE" --schema wizq >/dev/null
sql() { psql -d "$WIZQ_STORE" -qtAX -v ON_ERROR_STOP=1 -c "$1"; }
fill() {  # $1: schema
  sql "INSERT INTO $1.tasks (run, task_id, step, inputs, origin, dedup_key,
         max_attempts, created_ms, updated_ms)
       SELECT 1, g, 'Work', '{\"i\":' || g || '}', 0,
              'Work:{\"i\":' || g || '}', 3, 0, 0
       FROM generate_series(1, $ROWS) g"
  sql "ANALYZE $1.tasks"
}
fill wizq
"$BUILD/wizq" db migrate --store "$WIZQ_STORE" --schema rowhot >/dev/null
sql "DROP INDEX rowhot.tasks_ready, rowhot.tasks_in_progress, rowhot.tasks_hooks_due"
fill rowhot
sql "CREATE TABLE wizq.q (id bigint PRIMARY KEY, state smallint NOT NULL
       DEFAULT 0); CREATE INDEX q_ready ON wizq.q (id) WHERE state = 0;
     INSERT INTO wizq.q (id) SELECT generate_series(1, $ROWS);
     ANALYZE wizq.q"
sql "CREATE TABLE wizq.ts (run bigint NOT NULL, task_id bigint NOT NULL,
       state smallint NOT NULL DEFAULT 0, attempt int NOT NULL DEFAULT 0,
       claimed_by text NOT NULL DEFAULT '', claim_token text,
       claim_until_ms bigint NOT NULL DEFAULT 0,
       updated_ms bigint NOT NULL DEFAULT 0, PRIMARY KEY (run, task_id))
       WITH (fillfactor = 85);
     CREATE INDEX ts_ready ON wizq.ts (run, task_id) WHERE state = 0;
     CREATE INDEX ts_held ON wizq.ts (run, task_id) WHERE state = 1;
     INSERT INTO wizq.ts (run, task_id) SELECT 1, generate_series(1, $ROWS);
     ANALYZE wizq.ts"

# A task row written whole, fenced, as TaskWrite does (constants where the
# store binds its parameters: prepared alike).
wide_row() {  # $1 schema, $2 state, $3 claimed_by, $4 token, $5 settled, $6 id var
  echo "UPDATE $1.tasks SET state = $2, attempt = 1, max_attempts = 3,
    started = false, claimed_by = $3, claim_host = 'h', claim_token = $4,
    claim_until_ms = :now, lease_token = NULL, lease_expires_ms = 0,
    agent = '', timeout_ms = 0, deadline_ms = 0, retry_on_timeout = true,
    retry_at_ms = 0, error_reason = '', error_message = '',
    updated_ms = :now, finally_task = 0, hook_stale = false,
    reused_from = 0, answer = NULL, answer_source = '', open_children = 0,
    settled_counted = $5, hook_due = false WHERE run = 1 AND task_id = :$6
    AND attempt >= 0 AND claim_token IS NOT DISTINCT FROM claim_token;" |
    tr -s ' \n' ' '
  echo
}
script() {  # $1 kind
  printf '%s\n' '\set now random(1, 1000000000)'
  for i in $(seq 0 15); do echo "\\set id$i random(1, $ROWS)"; done
  printf '%s\n' '\startpipeline'
  echo 'BEGIN;'
  case $1 in
    trivial) for i in $(seq 0 15); do echo 'SELECT 1;'; done ;;
    bare)
      echo "UPDATE wizq.q SET state = 2 WHERE id IN (:id0, :id1, :id2, :id3, :id4, :id5, :id6, :id7);"
      echo "UPDATE wizq.q SET state = 1 WHERE id IN (:id8, :id9, :id10, :id11, :id12, :id13, :id14, :id15);" ;;
    wide | wide-hot)
      local s=wizq
      [ "$1" = wide-hot ] && s=rowhot
      for i in $(seq 0 7); do wide_row $s 1 "'w'" "'t'" false "id$i"; done
      for i in $(seq 8 15); do wide_row $s 2 "''" NULL true "id$i"; done ;;
    narrow)
      for i in $(seq 0 15); do
        st=1 cb="'w'" tok="'t'"
        [ "$i" -ge 8 ] && st=2 cb="''" tok=NULL
        echo "UPDATE wizq.ts SET state = $st, attempt = 1, claimed_by = $cb, claim_token = $tok, claim_until_ms = :now, updated_ms = :now WHERE run = 1 AND task_id = :id$i AND attempt >= 0 AND claim_token IS NOT DISTINCT FROM claim_token;"
      done ;;
    narrow-8)
      for half in 0 8; do
        st=1 cb="'w'" tok="'t'"
        [ "$half" = 8 ] && st=2 cb="''" tok=NULL
        vals=$(for i in $(seq "$half" $((half + 7))); do printf '(:id%d::bigint, 0), ' "$i"; done)
        echo "UPDATE wizq.ts t SET state = $st, attempt = 1, claimed_by = $cb, claim_token = $tok, claim_until_ms = :now, updated_ms = :now FROM (VALUES ${vals%, }) AS v(id, a) WHERE t.run = 1 AND t.task_id = v.id AND t.attempt >= v.a AND t.claim_token IS NOT DISTINCT FROM t.claim_token;"
      done ;;
  esac
  echo 'COMMIT;'
  printf '%s\n' '\endpipeline'
}
KINDS="trivial bare wide wide-hot narrow narrow-8"
for k in $KINDS; do script "$k" >"$WORK/$k.sql"; done
chmod 644 "$WORK"/*.sql
for r in $(seq 1 "$ROUNDS"); do
  for k in $KINDS; do
    ms=$("$PGBENCH" -n -M prepared -c 1 -T "$SECONDS_EACH" \
      -f "$WORK/$k.sql" "$WIZQ_STORE" 2>&1 | awk '/latency average/ {print $4}')
    echo "$k $ms" >>"$WORK/results"
    printf 'round %d %-9s %s ms a transaction\n' "$r" "$k" "$ms"
  done
done
median() { grep "^$1 " "$WORK/results" | awk '{print $2}' | sort -g |
  awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
printf 'MEDIANS'
for k in $KINDS; do printf ' %s=%s' "$k" "$(median "$k")"; done
echo
awk -v w="$(median wide)" -v h="$(median wide-hot)" -v b="$(median bare)" \
  -v n="$(median narrow)" -v n8="$(median narrow-8)" \
  -v t="$(median trivial)" 'BEGIN {
    printf "RESULT wide_over_bare=%.2f wide_hot_over_bare=%.2f", w / b, h / b
    printf " narrow_over_bare=%.2f narrow8_over_bare=%.2f", n / b, n8 / b
    printf " us_a_row: wide=%.1f wide_hot=%.1f narrow=%.1f\n",
      (w - t) * 1000 / 16, (h - t) * 1000 / 16, (n - t) * 1000 / 16 }'
