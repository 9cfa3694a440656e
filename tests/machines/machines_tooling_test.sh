#!/usr/bin/env bash
# machines_tooling_test: the test bed of the multi-machine torture, for real
# (docs/RELIABILITY.md, "Machines on one box"). Builds machines a and b and
# the database's machine db with tests/machines/machines.sh, a throwaway
# PostgreSQL cluster and wizq_fault_proxy, and checks: each machine's
# isolation (hostname, boot id, pid 1, addresses, reaching nothing but the
# db side), link down/up, freeze/thaw, stop/cont, kill-all, reboot, every
# proxy fault (a COMMIT whose reply is dropped is committed, a dropped
# COMMIT is not, both over the simple and the extended protocol; stall,
# resume, drop, half-open), a crash of the cluster, a clock offset under
# the jemalloc build of wizq; then a setup killed with -9 mid-way and a
# setup whose owner died, removed by the next `up` and by `cleanup`; and
# that teardown leaves nothing (links, namespaces, mounts, processes,
# cgroups, directories).
#
#   machines_tooling_test.sh BUILD_DIR
#
# Needs root (exit 77, skipped, without); fails when PostgreSQL or faketime
# is missing (`make test-deps` installs them).
set -euo pipefail

BUILD=$(cd "${1:?usage: machines_tooling_test.sh BUILD_DIR}" && pwd)
MS=$(cd "$(dirname "$0")" && pwd)/machines.sh
PG_BIN=${WIZQ_PG_BIN:-/usr/lib/postgresql/15/bin}
ROOT=${WIZQ_MACHINES_ROOT:-/run/wizq-machines}
PROXY=$BUILD/wizq_fault_proxy
T0=$EPOCHREALTIME

if ((EUID != 0)); then
  echo "SKIP: machines_tooling_test needs root (namespaces, veths, cgroups)"
  exit 77
fi
die() {
  echo "FAIL: $*" >&2
  [[ -z ${DIAG:-} ]] || eval "$DIAG" >&2 || true
  exit 1
}
calc() { awk "BEGIN { printf \"%.1f\", $* }"; }  # calc EXPR: EXPR, one decimal
is() { awk "BEGIN { exit !($*) }"; }               # is EXPR: whether EXPR holds
ok() { printf 'ok %6.1fs  %s\n' "$(calc "$EPOCHREALTIME - $T0")" "$*"; }
for f in "$BUILD/wizq" "$PROXY" "$BUILD/wizq_clock_probe" \
  "$BUILD/libwizq_faketime_gate.so" "$PG_BIN/initdb" "$PG_BIN/pgbench"; do
  [[ -x $f || -f $f ]] || die "missing $f (build the tests; make test-deps installs postgresql)"
done
compgen -G "/usr/lib/*/faketime/libfaketime.so.1" >/dev/null ||
  die "missing libfaketime (make test-deps installs faketime)"

export WIZQ_MACHINES_OWNER=$$ WIZQ_FAKETIME_GATE=$BUILD/libwizq_faketime_gate.so
WORK=$(mktemp -d /tmp/wizq-machines-test.XXXXXX)
chmod 755 "$WORK"  # the cluster's user reaches its directory in it
OTHERS=()          # sleep processes standing for other owners
finish() {
  bash "$MS" down || true
  ((${#OTHERS[@]} == 0)) || kill -9 "${OTHERS[@]}" 2>/dev/null || true
  bash "$MS" cleanup || true  # their setups, if a check failed first
  rm -rf "$WORK"
}
trap finish EXIT
ms() { bash "$MS" "$@"; }
mx() { bash "$MS" exec "$@"; }
# The host view that a teardown must restore.
snapshot() {
  ip -o link | awk -F': ' '{ print $2 }'
  ip netns list
  awk '{ print $5 }' /proc/self/mountinfo
}
# Prints "PID START" for every live process (not a zombie) in the network
# or PID namespace of one of the processes named (pids), those of the host
# aside. A process is named with its start time, as pids and namespace
# numbers are reused.
processes_of() {
  local ns p s k
  ns=$(for p; do
    for k in net pid; do
      [[ /proc/$p/ns/$k -ef /proc/$$/ns/$k ]] || stat -L -c %i "/proc/$p/ns/$k"
    done
  done 2>/dev/null)
  for p in $({ stat -L -c '%i %n' /proc/[0-9]*/ns/net /proc/[0-9]*/ns/pid 2>/dev/null || true; } |
    awk 'NR == FNR { want[$1] = 1; next } $1 in want { split($2, f, "/"); print f[3] }' \
      <(echo "$ns") - | sort -u); do
    read -r s 2>/dev/null <"/proc/$p/stat" || continue
    s=${s##*) }
    # shellcheck disable=SC2086
    set -- $s
    [[ $1 == Z ]] || echo "$p ${20}"
  done
}
# Prints "PID START" of every process of owner $1's machines.
owner_processes() {
  local f pids=()
  for f in "$ROOT/$1"/m/*/keeper "$ROOT/$1"/m/*/init; do pids+=("$(cut -d' ' -f1 "$f")"); done
  processes_of "${pids[@]}"
}
# Prints those of the processes in file $1 ("PID START" lines) still running.
still_running() {
  local pid start s
  while read -r pid start; do
    read -r s 2>/dev/null <"/proc/$pid/stat" || continue
    s=${s##*) }
    # shellcheck disable=SC2086
    set -- $s
    [[ $1 == Z || ${20} != "$start" ]] || echo "$pid"
  done <"$1"
}
# How many live processes machine $1 has (its init and this ps when idle;
# a process killed is a zombie until its parent reaps it).
live_in() { mx "$1" ps -e -o stat= | grep -vc '^Z'; }
wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local until=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    ((SECONDS < until)) || die "timed out waiting for $what"
    sleep 0.05
  done
}

snapshot >"$WORK/before"
ms cleanup

# --- setup and isolation ---------------------------------------------------
t=$EPOCHREALTIME
ms up a b
SETUP=$(calc "$EPOCHREALTIME - $t")
ok "up a b (machines a, b and db) in ${SETUP}s"
host_boot=$(</proc/sys/kernel/random/boot_id)
for m in a b; do
  [[ $(mx $m hostname) == "$m" ]] || die "hostname in $m"
  boot=$(mx $m cat /proc/sys/kernel/random/boot_id)
  [[ $boot != "$host_boot" && $boot == "$(<"$ROOT/$$/m/$m/boot_id")" ]] ||
    die "boot id in $m: $boot"
  echo "$boot" >>"$WORK/boots"
  [[ $(mx $m cat /proc/1/cmdline | tr '\0' ' ') == *"machines.sh __init $ROOT/$$ $m "* ]] ||
    die "pid 1 of $m is not its init"
  procs=$(mx $m ps -e -o pid=,comm=)
  [[ $(wc -l <<<"$procs") == 2 && $procs == *" 1 bash"* ]] ||
    die "$m sees processes not its own: $procs"
  i=$([[ $m == a ]] && echo 1 || echo 2)
  [[ $(mx $m ip -o addr | awk '{ print $2, $3, $4 }' | sort | tr '\n' ' ') == \
    "eth0 inet 10.213.$i.2/24 lo inet 127.0.0.1/8 " ]] || die "addresses of $m"
  [[ $(mx $m ip route | awk '{ $1 = $1; print }' | sort | tr '\n' ';') == \
    "10.213.0.1 dev eth0 scope link src 10.213.$i.2;10.213.$i.0/24 dev eth0 proto kernel scope link src 10.213.$i.2;" ]] ||
    die "routes of $m: $(mx $m ip route)"
  # Route lookups only: nothing is sent.
  ! mx $m ip route get 192.0.2.1 2>/dev/null || die "$m has a route out"
done
[[ $(sort -u "$WORK/boots" | wc -l) == 2 ]] || die "a and b share a boot id"
! mx a bash -c 'exec 3<>/dev/tcp/10.213.2.2/9' 2>"$WORK/err" || die "a reached b"
grep -q "Network is unreachable" "$WORK/err" || die "a to b: $(<"$WORK/err")"
ok "isolation: hostnames, boot ids, pid 1, process lists, addresses, routes; a cannot reach b"

# --- the database ----------------------------------------------------------
t=$EPOCHREALTIME
ms db-up "$WORK/pg" 5432
ok "db-up (initdb, start) in $(calc "$EPOCHREALTIME - $t")s"
q() { ms psql "$1" -XAtqc "$2"; }  # q MACHINE SQL: direct to the cluster
[[ $(q a "select inet_client_addr()") == 10.213.1.2 ]] || die "a's address at the database"
[[ $(q b "select inet_client_addr()") == 10.213.2.2 ]] || die "b's address at the database"
q a "create table t (x int primary key)"
ok "a and b reach the database at 10.213.0.1:5432 from their own addresses"

ms link-down a
t=$SECONDS
! PGCONNECT_TIMEOUT=2 q a "select 1" 2>/dev/null || die "a reached the database over a link down"
((SECONDS - t >= 1)) || die "the link down refused at once instead of dropping silently"
[[ $(q b "select 2") == 2 ]] || die "b lost the database when a's link went down"
ms link-up a
t=$EPOCHREALTIME
# New connects may fail (No route to host) until the address resolution
# begun during the outage has run out, as on a real network.
reaches_db() { [[ $(q a "select 3" 2>/dev/null) == 3 ]]; }
wait_for 10 "a to reach the database after link-up" reaches_db
ok "link-down a: a's connects time out (silent), b unaffected; link-up a: a connects again after $(calc "$EPOCHREALTIME - $t")s"

# --- freeze, stop, kill-all, reboot -----------------------------------------
tick() {
  local n=''
  read -r n 2>/dev/null <"$ROOT/$WIZQ_MACHINES_OWNER/m/$1/disk/tick" || true
  echo "${n:-0}"
}
ticked() { (($(tick "$1") > $2)); }  # ticked MACHINE N: its ticker passed N
ticker='echo $$ >/mnt/ticker; i=0; while :; do i=$((i + 1)); echo $i >/mnt/tick; sleep 0.05; done'
mx a sh -c "$ticker" &
wait_for 10 "a's ticker" ticked a 2
ms freeze a
n=$(tick a)
sleep 0.5
[[ $(tick a) == "$n" ]] || die "a ticked while frozen"
mx a true &  # started in a frozen machine: waits for the thaw
sleep 0.3
kill -0 $! 2>/dev/null || die "a process started in frozen a ran"
ms thaw a
wait_for 5 "a to tick after thaw" ticked a "$n"
wait $! || die "the process started while a was frozen failed"
ok "freeze a: a whole machine stops (a new process too); thaw: it goes on"

mx b sh -c "$ticker" &
wait_for 10 "b's ticker" ticked b 2
read -r tpid <"$ROOT/$$/m/b/disk/ticker"
ms stop b "$tpid"
n=$(tick b)
sleep 0.5
[[ $(tick b) == "$n" ]] || die "b's ticker ran while stopped"
[[ $(mx b ps -o stat= -p "$tpid") == T* ]] || die "b's ticker is not stopped"
ms cont b "$tpid"
wait_for 5 "b's ticker to go on" ticked b "$n"
ok "stop/cont b PID (machine pid $tpid): one process stops and goes on"

ms freeze a  # a frozen machine dies too
ms kill-all a
[[ $(live_in a) == 2 ]] || die "kill-all left processes in a"
[[ $(mx a cat /proc/sys/kernel/random/boot_id) == "$(sed -n 1p "$WORK/boots")" ]] ||
  die "kill-all changed a's boot id"
ok "kill-all a (frozen): every process of a gone but its init; same boot id; a runs commands again"

# All of b but its keeper (its network, not a process of the machine).
processes_of "$(cut -d' ' -f1 "$ROOT/$$/m/b/init")" |
  grep -v "^$(cut -d' ' -f1 "$ROOT/$$/m/b/keeper") " >"$WORK/b-procs"
(($(wc -l <"$WORK/b-procs") >= 3)) || die "not the processes of b expected before the reboot"
ms reboot b
[[ -z $(still_running "$WORK/b-procs") ]] || die "processes of b survived its reboot"
boot=$(mx b cat /proc/sys/kernel/random/boot_id)
[[ $boot != "$(sed -n 2p "$WORK/boots")" && $boot != "$host_boot" ]] || die "b's boot id after reboot"
[[ $(mx b hostname) == b && $(live_in b) == 2 ]] || die "b after reboot"
[[ $(q b "select inet_client_addr()") == 10.213.2.2 ]] || die "b's link after reboot"
ok "reboot b: its processes gone, new boot id, same name, address and link"
wait  # the tickers' exec commands, killed

# --- the fault proxy ---------------------------------------------------------
mx db sh -c "echo \$\$ >$WORK/proxy.pid; exec $PROXY --listen 10.213.0.1:6432 \
  --upstream 10.213.0.1:5432 --control $WORK/proxy.sock --log $WORK/faults.log" &
wait_for 10 "the proxy's control socket" test -S "$WORK/proxy.sock"
ctl() { "$PROXY" --control "$WORK/proxy.sock" --send "$*"; }
DIAG='ctl list; cat "$WORK/faults.log"; tail -n +1 "$WORK"/*.out'
VIA="host=10.213.0.1 port=6432 user=postgres dbname=postgres sslmode=disable"
# A transaction inserting $2 through the proxy from machine a, in mode $1:
# simple (psql, one Query per statement) or extended/prepared (pgbench);
# the COMMIT is spelled $3. Fails if the client saw no error.
txn() {
  printf 'BEGIN;\nINSERT INTO t VALUES (%s);\n%s;\n' "$2" "$3" >"$WORK/txn.sql"
  if [[ $1 == simple ]]; then
    ! mx a "$PG_BIN/psql" "$VIA" -X -v ON_ERROR_STOP=1 -f "$WORK/txn.sql" >"$WORK/txn.out" 2>&1
  else
    ! mx a "$PG_BIN/pgbench" "$VIA" -n -M "$1" -t 1 -f "$WORK/txn.sql" >"$WORK/txn.out" 2>&1 ||
      ! grep -q "actually processed: 1/1" "$WORK/txn.out"
  fi
}
has() { [[ $(q a "select count(*) from t where x = $1") == 1 ]]; }
ctl drop-commit-reply any >/dev/null
txn simple 1 COMMIT || die "the client got the dropped reply: $(<"$WORK/txn.out")"
grep -q "connection to server was lost" "$WORK/txn.out" || die "simple drop-commit-reply: $(<"$WORK/txn.out")"
has 1 || die "the transaction whose COMMIT reply was dropped is not committed"
ctl drop-commit any >/dev/null
txn simple 2 " END " || die "the client committed through a dropped COMMIT"
! has 2 || die "a dropped COMMIT (END) committed"
ctl drop-commit-reply any >/dev/null
txn extended 3 COMMIT || die "pgbench got the dropped reply: $(<"$WORK/txn.out")"
has 3 || die "extended: the transaction whose COMMIT reply was dropped is not committed"
ctl drop-commit any >/dev/null
txn prepared 4 commit || die "pgbench committed through a dropped COMMIT"
! has 4 || die "prepared: a dropped COMMIT committed"
txn simple 5 COMMIT && die "a plain transaction through the proxy failed: $(<"$WORK/txn.out")"
has 5 || die "a plain transaction through the proxy did not commit"
for f in 'drop-commit-reply.*"protocol":"simple","outcome":"COMMIT"' \
  'drop-commit".*"protocol":"simple"' \
  'drop-commit-reply.*"protocol":"extended","outcome":"COMMIT"' \
  'drop-commit".*"protocol":"extended"'; do
  grep -q "$f" "$WORK/faults.log" || die "no fault $f in the proxy's log"
done
ok "proxy: COMMIT reply dropped -> committed, COMMIT dropped -> not (simple and extended protocol), all logged"

conn_of() { ctl list | awk -v app="application_name=$1" '$0 ~ app " " { print $2 }'; }
long() {  # long APP SECONDS TIMEOUT: a session in a, through the proxy, in the background
  (
    rc=0
    PGAPPNAME=$1 bash "$MS" exec a timeout "$3" "$PG_BIN/psql" "$VIA" -XAtc "select pg_sleep($2)" \
      >"$WORK/$1.out" 2>&1 || rc=$?
    echo "rc=$rc" >>"$WORK/$1.out"
  ) &
}
long half 3 6
long victim 3 30
half_start=$SECONDS
has_conns() { [[ -n $(conn_of "$1") && -n $(conn_of "$2") ]]; }
wait_for 10 "the sessions at the proxy" has_conns half victim
ctl half-open "$(conn_of half)" >/dev/null
t=$SECONDS
ctl drop "$(conn_of victim)" >/dev/null
wait_for 5 "the dropped session to end" grep -q "rc=" "$WORK/victim.out"
grep -qx "rc=2" "$WORK/victim.out" || die "drop: $(<"$WORK/victim.out")"
ok "proxy: drop ID resets a session at once ($((SECONDS - t))s)"

ctl stall all >/dev/null
(
  rc=0
  PGAPPNAME=stalled bash "$MS" exec a "$PG_BIN/psql" "$VIA" -XAtc "select 'through'" \
    >"$WORK/stalled.out" 2>&1 || rc=$?
  echo "rc=$rc" >>"$WORK/stalled.out"
) &
stalled_in() { ctl list | grep -q "state=stalled"; }
wait_for 10 "a session held by the stalled proxy" stalled_in
sleep 1
[[ ! -s $WORK/stalled.out ]] || die "a session went through a stalled proxy: $(<"$WORK/stalled.out")"
ctl resume all >/dev/null
wait_for 10 "the stalled session" grep -q "rc=" "$WORK/stalled.out"
[[ $(<"$WORK/stalled.out") == $'through\nrc=0' ]] || die "after resume: $(<"$WORK/stalled.out")"
ok "proxy: stall all holds a new session, resume all lets it through"

wait_for 15 "the half-open session's own timeout" grep -q "rc=" "$WORK/half.out"
grep -qx "rc=124" "$WORK/half.out" || die "half-open: $(<"$WORK/half.out")"
((SECONDS - half_start >= 5)) || die "the half-open session ended before its timeout"
[[ $(q a "select count(*) from pg_stat_activity where application_name in ('half', 'victim')") == 0 ]] ||
  die "the server still has the half-open or dropped session"
ok "proxy: half-open leaves the client hanging until its own timeout (6 s), the server's side closed"

read -r ppid <"$WORK/proxy.pid"
mx db kill -TERM "$ppid"
wait_for 5 "the proxy to remove its control socket" test ! -e "$WORK/proxy.sock"
DIAG=

t=$EPOCHREALTIME
ms db-crash
[[ $(q b "select count(*) from t") == 3 ]] || die "rows lost in db-crash"
grep -q "database system was interrupted" "$WORK/pg/postgres.log" ||
  die "db-crash did not crash: $(tail -5 "$WORK/pg/postgres.log")"
ok "db-crash: stop -m immediate and start (recovery) in $(calc "$EPOCHREALTIME - $t")s, committed rows kept"

# --- clock offset under the jemalloc build -----------------------------------
# A sanitizer build (make asan) refuses a preloaded library ahead of its
# runtime unless told that the order is meant.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
ms clock a 1800
host=$("$BUILD/wizq_clock_probe")
# Bounded: a program that hangs under libfaketime fails the test.
probe=$(timeout 20 bash "$MS" exec a "$BUILD/wizq_clock_probe") ||
  die "wizq_clock_probe under faketime failed or hung"
read -r host_real host_mono _ <<<"$host"
read -r real mono libs <<<"$probe"
is "$real - $host_real - 1800 < 10 && $real - $host_real - 1800 > -10" || die "a's wall clock: $probe vs host $host"
is "$mono - $host_mono < 10 && $mono >= $host_mono" || die "a's monotonic clock: $probe vs host $host"
[[ $(mx b "$BUILD/wizq_clock_probe") != *faketime* ]] || die "b got a's clock"
expected=faketime
[[ $(ldd "$BUILD/wizq") != *libjemalloc* ]] || expected=jemalloc,faketime
[[ $libs == "$expected" ]] || die "probe in a maps '$libs', expected $expected"
timeout 20 bash "$MS" exec a "$BUILD/wizq" --version | grep -q '^wizq ' ||
  die "wizq --version under faketime"
echo '{"entrypoint":"Hello","steps":[{"name":"Hello","action":{"kind":"Command","script":"echo []"},"next":[]}]}' >"$WORK/wf.json"
timeout 60 bash "$MS" exec a "$BUILD/wizq" run "$WORK/wf.json" --dir /mnt/run --quiet ||
  die "wizq run under faketime"
ts=$(head -1 "$ROOT/$$/m/a/disk/run/.wizard/audit.jsonl" | sed 's/.*"ts":\([0-9]*\).*/\1/')
now=$(date +%s)
is "$ts / 1000 - $now - 1800 < 30 && $ts / 1000 - $now - 1800 > -30" || die "wizq's event time in a: $ts"
ok "clock a +1800: wall clock +1800 s, monotonic the host's, in a $expected process; wizq --version and wizq run work there (event ts +1800 s)"

# --- a setup killed with -9, an owner that died ---------------------------------
keeper_of() { grep -lsa "wizq-machines:$1:[0-9]*:$2" /proc/[0-9]*/cmdline | cut -d/ -f3; }
sleep 600 &
o2=$!
OTHERS+=("$o2")
# It stops itself once x is up (WIZQ_MACHINES_STOP_AFTER), so the kill
# lands between x and y whatever the machine's speed.
WIZQ_MACHINES_OWNER=$o2 WIZQ_MACHINES_STOP_AFTER=x setsid bash "$MS" up x y >"$WORK/up2.log" 2>&1 &
up2=$!
stopped_up2() { [[ $(awk '{ sub(/.*\) /, ""); print $1 }' "/proc/$up2/stat") == T ]]; }
wait_for 60 "the second setup to stop after x" stopped_up2
[[ -n $(keeper_of "$o2" x) && ! -e $ROOT/$o2/m/y ]] ||
  die "the second setup stopped after x without x's keeper, or with y begun: $(ls "$ROOT/$o2/m")"
kill -9 -- "-$up2"
kill -9 "$o2"
wait "$up2" 2>/dev/null || true
# shellcheck disable=SC2046
processes_of $(keeper_of "$o2" "") >"$WORK/o2-procs"
[[ -s $WORK/o2-procs && -d $ROOT/$o2 ]] || die "the killed setup left nothing to clean"
ok "up x y killed with -9 mid-way (x started, y not done): $(wc -l <"$WORK/o2-procs") processes left"

sleep 600 &
o3=$!
OTHERS+=("$o3")
WIZQ_MACHINES_OWNER=$o3 WIZQ_MACHINES_FREEZER=signals bash "$MS" up c
[[ ! -e $ROOT/$o2 ]] || die "up left the killed setup's state: $(ls -R "$ROOT/$o2")"
[[ -z $(keeper_of "$o2" "") ]] || die "up left the killed setup's keepers: $(keeper_of "$o2" "")"
[[ -z $(still_running "$WORK/o2-procs") ]] || die "up left processes of the killed setup"
! compgen -G "/sys/fs/cgroup/*/wizq-machines/$o2" >/dev/null || die "the killed setup's cgroups are left"
export WIZQ_MACHINES_OWNER=$o3
mx c sh -c "$ticker" &
wait_for 10 "c's ticker" ticked c 2
ms freeze c
n=$(tick c)
sleep 0.5
[[ $(tick c) == "$n" ]] || die "c ticked while frozen by signals"
ms thaw c
wait_for 5 "c to tick after thaw" ticked c "$n"
ms freeze c
ms kill-all c
[[ $(live_in c) == 2 ]] || die "kill-all left processes in frozen c"
owner_processes "$o3" >"$WORK/o3-procs"
export WIZQ_MACHINES_OWNER=$$
ok "the next up removed the killed setup's processes, namespaces, cgroups and state; freeze, thaw, kill-all by signals"

kill -9 "$o3"
ms cleanup
[[ ! -e $ROOT/$o3 && -z $(still_running "$WORK/o3-procs") ]] || die "cleanup left the dead owner's setup"
[[ $(q a "select 1") == 1 ]] || die "cleanup touched a live owner's setup"
ok "cleanup removed the setup of an owner that died, and left the live one alone"
wait 2>/dev/null || true

# --- teardown ------------------------------------------------------------------
owner_processes $$ >"$WORK/procs"
[[ -s $WORK/procs ]] || die "no processes of the machines found before down"
t=$EPOCHREALTIME
ms down
TEARDOWN=$(calc "$EPOCHREALTIME - $t")
snapshot >"$WORK/after"
diff "$WORK/before" "$WORK/after" || die "links, namespaces or mounts differ after teardown"
[[ -z $(still_running "$WORK/procs") ]] || die "processes of the machines left"
[[ -z $(keeper_of $$ "") && ! -e $ROOT/$$ && ! -e $WORK/pg ]] || die "keepers, state or cluster left"
! compgen -G "/sys/fs/cgroup/*/wizq-machines/$$" >/dev/null || die "cgroups left"
ok "down in ${TEARDOWN}s: links, namespaces, mounts as before; no process, cgroup, state or cluster left"
echo "MACHINES-TOOLING setup=${SETUP}s teardown=${TEARDOWN}s total=$(calc "$EPOCHREALTIME - $T0")s"
