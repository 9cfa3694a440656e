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
# and two whole transactions, 8 tasks completed and 8 claimed, on tables
# of their own (ROWS x 24 ... rows, so that the rounds never drain them):
#   bare-txn  the pg_bench baseline's: BEGIN, the done UPDATE, the SKIP
#             LOCKED claim UPDATE, COMMIT, each its own round trip;
#   model-txn a sketch of the redesign (docs/BENCHMARKS.md): in one round
#             trip the run's counters, the 8 done and the 8 claimed on a
#             narrow table (fenced, the claim's step and retry tests in its
#             locked subquery, the wide row joined for the inputs); in a
#             second the 16 events (gap-free seq from the run's row) and
#             COMMIT. Both take the done tasks as the 8 lowest in progress.
# Prints each one's mean latency a transaction (ms), the median over the
# rounds, and each ÷ bare (model-txn ÷ bare-txn).
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
TXN_ROWS=$((ROWS * 24 > 600000 ? ROWS * 24 : 600000))
sql "CREATE TABLE wizq.qt (id bigint PRIMARY KEY, state smallint NOT NULL
       DEFAULT 0); CREATE INDEX qt_ready ON wizq.qt (id) WHERE state = 0;
     CREATE INDEX qt_held ON wizq.qt (id) WHERE state = 1;
     INSERT INTO wizq.qt (id) SELECT generate_series(1, $TXN_ROWS);
     ANALYZE wizq.qt"
sql "CREATE TABLE wizq.mt (run bigint NOT NULL, task_id bigint NOT NULL,
       step text NOT NULL, state smallint NOT NULL DEFAULT 0,
       attempt int NOT NULL DEFAULT 0, claimed_by text NOT NULL DEFAULT '',
       claim_token text, claim_until_ms bigint NOT NULL DEFAULT 0,
       retry_at_ms bigint NOT NULL DEFAULT 0,
       updated_ms bigint NOT NULL DEFAULT 0, PRIMARY KEY (run, task_id))
       WITH (fillfactor = 85);
     CREATE INDEX mt_ready ON wizq.mt (run, task_id) WHERE state = 0;
     CREATE INDEX mt_held ON wizq.mt (run, task_id) WHERE state = 1;
     INSERT INTO wizq.mt (run, task_id, step)
       SELECT 1, generate_series(1, $TXN_ROWS), 'Work';
     ANALYZE wizq.mt;
     CREATE TABLE wizq.mruns (run bigint PRIMARY KEY, next_seq bigint NOT NULL,
       n_pending bigint NOT NULL, n_in_progress bigint NOT NULL,
       n_done bigint NOT NULL);
     INSERT INTO wizq.mruns VALUES (1, 1, $TXN_ROWS, 0, 0);
     CREATE TABLE wizq.mevents (run bigint NOT NULL, seq bigint NOT NULL,
       kind text NOT NULL, body text NOT NULL, PRIMARY KEY (run, seq))"

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
txn_script() {  # $1 kind
  printf '%s\n' '\set now random(1, 1000000000)'
  case $1 in
    bare-txn)
      echo 'BEGIN;'
      echo 'UPDATE wizq.qt SET state = 2 WHERE id IN (SELECT id FROM wizq.qt WHERE state = 1 ORDER BY id LIMIT 8);'
      echo 'UPDATE wizq.qt SET state = 1 WHERE id IN (SELECT id FROM wizq.qt WHERE state = 0 ORDER BY id LIMIT 8 FOR UPDATE SKIP LOCKED) RETURNING id;'
      echo 'COMMIT;' ;;
    model-txn)
      printf '%s\n' '\startpipeline'
      echo 'BEGIN;'
      echo 'UPDATE wizq.mruns SET next_seq = next_seq + 16, n_done = n_done + 8, n_pending = n_pending - 8 WHERE run = 1;'
      echo 'UPDATE wizq.mt t SET state = 2, claimed_by = '"''"', claim_token = NULL, updated_ms = :now FROM (SELECT task_id, attempt, claim_token FROM wizq.mt WHERE run = 1 AND state = 1 ORDER BY task_id LIMIT 8) v WHERE t.run = 1 AND t.task_id = v.task_id AND t.attempt = v.attempt AND t.claim_token = v.claim_token;'
      echo "WITH c AS (UPDATE wizq.mt SET state = 1, attempt = attempt + 1, claimed_by = 'w1-ab12', claim_token = md5(:now::text || task_id::text), claim_until_ms = :now + 30000, updated_ms = :now WHERE run = 1 AND task_id IN (SELECT task_id FROM wizq.mt WHERE run = 1 AND state = 0 AND step = ANY('{Work}') AND retry_at_ms <= :now ORDER BY task_id LIMIT 8 FOR UPDATE SKIP LOCKED) RETURNING task_id, attempt, claim_token) SELECT c.task_id, c.attempt, c.claim_token, w.step, w.inputs FROM c LEFT JOIN wizq.tasks w ON w.run = 1 AND w.task_id = (c.task_id - 1) % $ROWS + 1;"
      printf '%s\n' '\endpipeline' '\startpipeline'
      echo "INSERT INTO wizq.mevents (run, seq, kind, body) SELECT 1, (SELECT next_seq FROM wizq.mruns WHERE run = 1) - 17 + i, 'task_claimed', '{\"e\":\"task_claimed\",\"id\":' || (:now + i) || ',\"type\":\"Work\",\"worker\":\"w1-ab12\",\"attempt\":1,\"host\":\"h1\",\"ts\":1764400000000}' FROM generate_series(1, 16) i;"
      echo 'COMMIT;'
      printf '%s\n' '\endpipeline' ;;
  esac
}
script() {  # $1 kind
  case $1 in *-txn) txn_script "$1"; return ;; esac
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
KINDS="trivial bare wide wide-hot narrow narrow-8 bare-txn model-txn"
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
# The whole transactions did their work (a statement that failed would
# have ended pgbench's client at once, and a claim that took nothing would
# time an empty transaction).
checks=$(sql "SELECT (SELECT count(*) FROM wizq.qt WHERE state = 2) || ' ' ||
  (SELECT count(*) FROM wizq.mt WHERE state = 2) || ' ' ||
  (SELECT count(*) FROM wizq.mevents) || ' ' ||
  (SELECT count(*) FROM wizq.mt WHERE state = 1)")
read -r bare_done model_done model_events model_held <<<"$checks"
echo "bare-txn completed $bare_done tasks; model-txn $model_done, with $model_events events, $model_held held at the end"
if ((bare_done == 0 || model_done == 0 || model_events != 2 * model_done + 2 * model_held)); then
  echo "pg_row_bench: a whole transaction did not do its work" >&2
  exit 1
fi
median() { grep "^$1 " "$WORK/results" | awk '{print $2}' | sort -g |
  awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
printf 'MEDIANS'
for k in $KINDS; do printf ' %s=%s' "$k" "$(median "$k")"; done
echo
awk -v w="$(median wide)" -v h="$(median wide-hot)" -v b="$(median bare)" \
  -v n="$(median narrow)" -v n8="$(median narrow-8)" \
  -v bt="$(median bare-txn)" -v m="$(median model-txn)" \
  -v t="$(median trivial)" 'BEGIN {
    printf "RESULT wide_over_bare=%.2f wide_hot_over_bare=%.2f", w / b, h / b
    printf " narrow_over_bare=%.2f narrow8_over_bare=%.2f", n / b, n8 / b
    printf " model_txn_over_bare_txn=%.2f", m / bt
    printf " us_a_row: wide=%.1f wide_hot=%.1f narrow=%.1f\n",
      (w - t) * 1000 / 16, (h - t) * 1000 / 16, (n - t) * 1000 / 16 }'
