#!/usr/bin/env bash
# machines.sh: "machines" on one box, the test bed of wizq's multi-machine
# torture (docs/RELIABILITY.md, "Machines on one box"). Needs root.
#
# A machine is its own network, UTS, IPC, mount and PID namespace: its own
# loopback, a veth pair (eth0 inside, v-NAME at the other end) to the
# database's machine "db", hostname NAME, /mnt its own directory (kept
# across reboots), its own /dev/shm and /sys, and a file of its own bind-
# mounted over /proc/sys/kernel/random/boot_id, new at each reboot (wizq
# tells hosts apart by boot id and PID namespace). Its init, pid 1 inside,
# is this script; what `exec` starts joins all its namespaces and its
# freezer cgroup. A keeper process on the host (`sleep`, named
# wizq-machines:OWNER:START:NAME) holds its network namespace, so that the
# link outlives a reboot.
#
# Addresses (10.213.0.0/16, inside these namespaces only): machine number i
# (1..254) is 10.213.i.2/24 on eth0, the db end of its link 10.213.i.1/24,
# and the database's address 10.213.0.1 is on db's loopback. A machine's
# only routes are its /24 and 10.213.0.1: it reaches the db side and
# nothing else (no other machine, no default route; IPv6 off).
#
# A setup belongs to its owner, a live process: $WIZQ_MACHINES_OWNER, else
# the caller (the parent process; a caller that runs this script through a
# short-lived `sh -c` must set it). Its state is in /run/wizq-machines/OWNER
# ($WIZQ_MACHINES_ROOT). `up` and `cleanup` first remove all that owners no
# longer running left (a run killed with -9): every process of their
# namespaces, their cgroups, cluster directory and state.
#
#   up NAME...          start machines (db first, if not up); NAME matches
#                       [a-z][a-z0-9]{0,9}
#   down [NAME...]      stop and remove machines; none named: everything of
#                       this owner, the cluster too
#   exec NAME CMD...    run CMD in machine NAME (working directory and
#                       environment kept, its clock offset applied); CMD's
#                       exit status. CMD is the child of a host-side
#                       nsenter that waits for it: signal CMD inside the
#                       machine (stop, kill-all), as killing that nsenter
#                       (e.g. by `timeout`) leaves CMD running
#   reboot NAME         kill -9 every process of NAME, new boot id, new init
#   kill-all NAME       kill -9 every process of NAME but its init (it stays up)
#   freeze NAME, thaw NAME       stop, continue the whole machine
#   stop NAME PID, cont NAME PID SIGSTOP, SIGCONT one process (PID as seen
#                                in the machine)
#   link-down NAME, link-up NAME take NAME's link to db down (its packets
#                                are then lost, silently), up
#   clock NAME SECONDS  wall-clock offset (-3600..3600, 0 removes it) of what
#                       `exec` starts from then on: libfaketime with
#                       DONT_FAKE_MONOTONIC=1, preloaded after the gate
#                       $WIZQ_FAKETIME_GATE (default build/
#                       libwizq_faketime_gate.so) that lets it work under
#                       jemalloc
#   db-up DIR PORT      a throwaway PostgreSQL cluster in DIR (absent or
#                       empty) on 10.213.0.1:PORT, trust for 10.213.0.0/16
#                       and the Unix socket in DIR ($WIZQ_PG_BIN: the server
#                       binaries, default /usr/lib/postgresql/15/bin)
#   db-down             stop it and remove DIR
#   db-crash            pg_ctl stop -m immediate, then start again
#   psql NAME ARGS...   psql in machine NAME to the cluster, sslmode=disable
#   info                machines, addresses, init pids, boot ids, clocks
#   cleanup             remove what owners no longer running left
#
# Freezing uses the cgroup v2 freezer, else v1's, else SIGSTOP to every
# process of the machine's PID namespace ($WIZQ_MACHINES_FREEZER=cgroup2,
# freezer or signals picks one). For tests of a setup killed mid-way,
# $WIZQ_MACHINES_STOP_AFTER=NAME makes `up` stop itself (SIGSTOP) right
# after it made NAME. Exit status: 0 ok, 2 bad arguments, 3 the
# environment (not root, a tool or machine missing), else CMD's.
set -euo pipefail

SELF=${BASH_SOURCE[0]}
[[ $SELF == /* ]] || SELF=$PWD/$SELF
ROOT=${WIZQ_MACHINES_ROOT:-/run/wizq-machines}
export WIZQ_MACHINES_OWNER=${WIZQ_MACHINES_OWNER:-$PPID}
OWNER=$WIZQ_MACHINES_OWNER
STATE=$ROOT/$OWNER
DB_ADDR=10.213.0.1
PG_BIN=${WIZQ_PG_BIN:-/usr/lib/postgresql/15/bin}
FREEZER=signals FREEZER_DIR=''

usage() { echo "machines.sh: $*" >&2; exit 2; }
fail() { echo "machines.sh: $*" >&2; exit 3; }

# The processes, namespaces, freezer and owners.
# shellcheck source=tests/machines/machines_lib.sh
source "${SELF%/*}/machines_lib.sh"

# --- machines ------------------------------------------------------------

# Runs "$@" in machine $1's network namespace (through its keeper).
in_net() {
  get_pid "$1" keeper
  shift
  nsenter --net="/proc/$PID/ns/net" "$@"
}

start_keeper() {
  local name=$1 dir=$STATE/m/$1 pid a=()
  get_start "$OWNER"
  # Named from setsid's exec on, so that a cleanup finds it even if this
  # script dies right now.
  setsid unshare --net -- bash -c 'exec -a "$0" sleep infinity' \
    "wizq-machines:$OWNER:$START:$name" </dev/null >/dev/null 2>&1 8<&- 9>&- &
  pid=$!
  get_start "$pid"
  echo "$pid $START" >"$dir/keeper"
  until [[ ! /proc/$pid/ns/net -ef /proc/$$/ns/net ]] &&
    mapfile -d '' -t a 2>/dev/null <"/proc/$pid/cmdline" && [[ ${a[0]:-} == wizq-* ]]; do
    [[ -e /proc/$pid ]] || fail "the keeper of $name died"
    nap 0.01
  done
}

# Loopback up; for a machine, its veth to db with addresses and routes.
configure_net() {
  local name=$1 i keeper
  if [[ $name == db ]]; then
    printf 'link set lo up\naddr add %s/32 dev lo\n' "$DB_ADDR" | in_net db ip -batch -
    return
  fi
  read -r i <"$STATE/m/$name/index"
  get_pid "$name" keeper
  keeper=$PID
  in_net db ip -batch - <<EOF
link add v-$name type veth peer name eth0 netns /proc/$keeper/ns/net
addr add 10.213.$i.1/24 dev v-$name
link set v-$name up
EOF
  in_net "$name" ip -batch - <<EOF
link set lo up
addr add 10.213.$i.2/24 dev eth0
link set eth0 up
route add $DB_ADDR/32 dev eth0 src 10.213.$i.2
EOF
}

# Starts machine $1's init (new PID, mount, UTS and IPC namespaces, in its
# network namespace and cgroup) and waits until it is ready.
start_init() {
  local name=$1 dir=$STATE/m/$1 u i init
  get_pid "$name" keeper
  rm -f "$dir/ready"
  (
    join_cgroup "$name" "$BASHPID"
    exec 8<&- 9>&-  # the locks stay with this script
    exec setsid nsenter --net="/proc/$PID/ns/net" unshare --fork --pid \
      --mount-proc --uts --ipc --mount --propagation private -- \
      bash "$SELF" __init "$STATE" "$name"
  ) </dev/null >>"$dir/log" 2>&1 &
  u=$!
  for ((i = 0; i < 2000; i++)); do
    [[ ! -e $dir/ready ]] || break
    [[ -e /proc/$u ]] || fail "machine $name did not start: $(tail -3 "$dir/log")"
    nap 0.01
  done
  [[ -e $dir/ready ]] || fail "machine $name did not start in 20 s"
  get_child "$u"
  init=$PID
  get_start "$init"
  echo "$init $START" >"$dir/init"
}

# pid 1 of a machine: hostname, IPv6 off, mounts; then it waits forever
# with no child (so kill-all leaves it with nothing to restart), bash
# reaping the orphans it inherits.
machine_init() {
  local dir=$1/m/$2
  echo "$2" >/proc/sys/kernel/hostname
  echo 1 >/proc/sys/net/ipv6/conf/all/disable_ipv6
  echo 1 >/proc/sys/net/ipv6/conf/default/disable_ipv6
  mount --bind "$dir/boot_id" /proc/sys/kernel/random/boot_id
  mount --bind "$dir/disk" /mnt
  mount -t tmpfs -o size=64m,mode=1777 tmpfs /dev/shm
  mount -t sysfs sysfs /sys
  exec 3<> <(:)
  : >"$dir/ready"
  trap 'exit 0' TERM
  while :; do read -r -u 3 _ || true; done
}

new_boot_id() { cat /proc/sys/kernel/random/uuid >"$STATE/m/$1/boot_id"; }

make_machine() {
  local name=$1 dir=$STATE/m/$1 i=0
  mkdir -p "$dir/disk"
  if [[ $name != db ]]; then
    for ((i = 1; i < 255; i++)); do
      grep -qsx "$i" "$STATE"/m/*/index || break
    done
    ((i < 255)) || fail "all 254 machine numbers are taken"
  fi
  echo "$i" >"$dir/index"
  new_boot_id "$name"
  [[ $FREEZER == signals ]] || mkdir -p "$FREEZER_DIR/$name"
  start_keeper "$name"
  configure_net "$name"
  start_init "$name"
}

# Kills every process of machine $1 but its init ($2 = all), or with it
# and the host-side processes in its network namespace but the keeper ($2
# = init); waits until they are gone and leaves the machine thawed.
kill_machine() {
  local name=$1 mode=$2 keeper init spared p fd='' refs=()
  get_pid "$name" keeper
  keeper=$PID
  get_pid "$name" init
  init=$PID
  if [[ -n $init ]]; then
    exec {fd}<"/proc/$init/ns/pid"  # the namespace outlives its init
    refs+=("pid:/dev/fd/$fd")
  fi
  [[ $mode == all ]] || refs+=("net:/proc/$keeper/ns/net")
  spared=$keeper
  [[ $mode == init ]] || spared+=" $init"
  if [[ -e $STATE/m/$name/frozen ]]; then
    # A v1-frozen process dies only once thawed: the kill comes first.
    get_members "${refs[@]}"
    for p in "${PIDS[@]}"; do [[ " $spared " == *" $p "* ]] || kill -9 "$p" 2>/dev/null || true; done
    set_frozen "$name" 0
  fi
  ((${#refs[@]} == 0)) || kill_members "$spared" "${refs[@]}"
  [[ -z $fd ]] || exec {fd}<&-
}

remove_machine() {
  local name=$1
  kill_machine "$name" init
  get_pid "$name" keeper
  if [[ -n $PID ]]; then
    kill -9 "$PID"
    while running "$PID"; do nap 0.01; done
  fi
  [[ $FREEZER == signals || ! -d $FREEZER_DIR/$name ]] || rmdir "$FREEZER_DIR/$name"
  rm -rf "${STATE:?}/m/$name"
}

# --- PostgreSQL ----------------------------------------------------------

# Sets DIR and PORT to the cluster's.
get_cluster() {
  read -r DIR PORT 2>/dev/null <"$STATE/m/db/cluster" ||
    fail "no cluster (machines.sh db-up DIR PORT)"
}

# Runs "$@" as user postgres in machine db.
as_postgres() { bash "$SELF" exec db runuser -u postgres -- "$@"; }

db_up() {
  (($# == 2)) || usage "db-up DIR PORT"
  local dir=$1 port=$2
  [[ $dir == /* ]] || usage "db-up: DIR must be absolute, not $dir"
  [[ $port =~ ^[0-9]+$ ]] || usage "db-up: bad PORT $port"
  [[ -x $PG_BIN/initdb ]] ||
    fail "no PostgreSQL in $PG_BIN (apt-get install postgresql, or set WIZQ_PG_BIN)"
  [[ ! -e $STATE/m/db/cluster ]] || fail "a cluster is up already (machines.sh db-down)"
  [[ ! -e $dir || -z $(ls -A "$dir") ]] || usage "db-up: $dir is not empty"
  mkdir -p "$dir"
  echo "$dir $port" >"$STATE/m/db/cluster"  # first: a teardown removes DIR
  chown postgres: "$dir"
  chmod 700 "$dir"
  runuser -u postgres -- test -w "$dir" ||
    fail "user postgres cannot write $dir (a parent directory not searchable?)"
  as_postgres "$PG_BIN/initdb" -D "$dir/data" -U postgres -A trust --no-sync \
    -E UTF8 --locale=C >"$dir/initdb.log" || fail "initdb failed: see $dir/initdb.log"
  cat >>"$dir/data/postgresql.conf" <<EOF
listen_addresses = '$DB_ADDR'
port = $port
unix_socket_directories = '$dir'
max_connections = 200
log_lock_waits = on
log_line_prefix = '%m [%p] %a '
EOF
  printf 'local all all trust\nhost all all 10.213.0.0/16 trust\n' >"$dir/data/pg_hba.conf"
  pg_start
}

pg_start() {
  get_cluster
  as_postgres "$PG_BIN/pg_ctl" -D "$DIR/data" -l "$DIR/postgres.log" -w -t 60 \
    start >/dev/null || fail "PostgreSQL did not start: see $DIR/postgres.log"
}

# pg_ctl stop in mode $1; failing that, kill -9 the server's processes.
pg_stop() {
  local p owner
  get_cluster
  as_postgres "$PG_BIN/pg_ctl" -D "$DIR/data" -m "$1" -w -t 60 stop \
    >/dev/null 2>&1 && return
  get_pid db init
  PIDS=()
  [[ -z $PID ]] || get_members "pid:/proc/$PID/ns/pid"
  for p in "${PIDS[@]}"; do
    owner=$(stat -c %U "/proc/$p" 2>/dev/null) || continue
    [[ $owner != postgres ]] || kill -9 "$p" 2>/dev/null || true
  done
}

db_down() {
  get_cluster
  pg_stop fast
  rm -rf "$DIR"
  rm -f "$STATE/m/db/cluster"
}

# --- commands ------------------------------------------------------------

cmd_up() {
  (($# > 0)) || usage "up NAME..."
  local name
  for name; do
    [[ $name =~ ^[a-z][a-z0-9]{0,9}$ ]] || usage "bad machine name '$name' ([a-z][a-z0-9]{0,9})"
    [[ $name != db ]] || usage "db is the database's machine, started by up"
  done
  lock_root
  cleanup_dead
  ensure_owner
  exec 8<&-
  lock_owner
  [[ -d $STATE/m/db ]] || make_machine db
  for name; do
    [[ ! -d $STATE/m/$name ]] || usage "machine $name is up already"
    make_machine "$name"
    [[ ${WIZQ_MACHINES_STOP_AFTER:-} != "$name" ]] || kill -STOP "$BASHPID"
  done
}

cmd_down() {
  [[ -d $STATE ]] || return 0
  lock_owner
  local name
  if (($# == 0)); then
    [[ ! -e $STATE/m/db/cluster ]] || db_down
    exec 9>&-
    lock_root
    teardown_owner "$OWNER"
    remove_root
    return
  fi
  for name; do
    [[ $name != db ]] || usage "db goes last, with everything: machines.sh down"
    need_machine "$name"
    remove_machine "$name"
  done
}

cmd_exec() {
  (($# >= 2)) || usage "exec NAME CMD..."
  local name=$1 offset=0 lib gate env=()
  shift
  need_running "$name"
  read -r offset 2>/dev/null <"$STATE/m/$name/clock" || true
  if ((offset != 0)); then
    lib=${WIZQ_LIBFAKETIME:-$(echo /usr/lib/*/faketime/libfaketime.so.1)}
    gate=${WIZQ_FAKETIME_GATE:-${SELF%/*}/../../build/libwizq_faketime_gate.so}
    [[ -f $lib ]] || fail "no libfaketime (apt-get install faketime)"
    [[ -f $gate ]] || fail "no $gate (build the wizq_faketime_gate target, or set WIZQ_FAKETIME_GATE)"
    env=(env "LD_PRELOAD=$gate $lib${LD_PRELOAD:+ $LD_PRELOAD}"
      "FAKETIME=$( ((offset < 0)) || echo +)$offset" DONT_FAKE_MONOTONIC=1)
  fi
  join_cgroup "$name" $$
  exec 8<&- 9>&-
  exec nsenter --target "$PID" --net --uts --ipc --mount --pid --wd="$PWD" \
    -- "${env[@]}" "$@"
}

cmd_info() {
  [[ -d $STATE ]] || return 0
  local dir name i boot clock addr
  echo "owner $OWNER state $STATE freezer $FREEZER"
  for dir in "$STATE"/m/*/; do
    name=${dir%/}
    name=${name##*/}
    read -r i <"$dir/index"
    read -r boot <"$dir/boot_id"
    clock=0
    read -r clock 2>/dev/null <"$dir/clock" || true
    addr=10.213.$i.2
    [[ $name != db ]] || addr=$DB_ADDR
    get_pid "$name" init
    echo "$name address $addr init ${PID:--} boot_id $boot clock $clock$([[ ! -e $dir/frozen ]] || echo ' frozen')"
  done
  [[ ! -e $STATE/m/db/cluster ]] || { get_cluster && echo "cluster $DIR port $PORT"; }
}

cmd_machine() {
  local cmd=$1 name=$2
  need_machine "$name"
  lock_owner
  case $cmd in
    reboot)
      kill_machine "$name" init
      new_boot_id "$name"
      start_init "$name" ;;
    kill-all) kill_machine "$name" all ;;
    freeze) set_frozen "$name" 1 ;;
    thaw) set_frozen "$name" 0 ;;
    link-down | link-up)
      [[ $name != db ]] || usage "db has no link of its own; take the machines' down"
      in_net db ip link set "v-$name" "${cmd#link-}" ;;
  esac
}

main() {
  (($# > 0)) || usage "a command: up down exec reboot kill-all freeze thaw stop cont link-down link-up clock db-up db-down db-crash psql info cleanup"
  local cmd=$1
  shift
  [[ $cmd != __init ]] || machine_init "$@"
  ((EUID == 0)) || fail "needs root (namespaces, veths, cgroups)"
  command -v ip >/dev/null || fail "no ip (apt-get install iproute2)"
  command -v nsenter >/dev/null || fail "no nsenter (apt-get install util-linux)"
  [[ ! -e $STATE/freezer ]] || read -r FREEZER FREEZER_DIR <"$STATE/freezer"
  case $cmd in
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    exec) cmd_exec "$@" ;;
    psql)
      (($# >= 1)) || usage "psql NAME ARGS..."
      get_cluster
      local name=$1
      shift
      cmd_exec "$name" "$PG_BIN/psql" \
        "host=$DB_ADDR port=$PORT user=postgres dbname=postgres sslmode=disable" "$@" ;;
    reboot | kill-all | freeze | thaw | link-down | link-up)
      (($# == 1)) || usage "$cmd NAME"
      cmd_machine "$cmd" "$1" ;;
    stop | cont)
      (($# == 2)) || usage "$cmd NAME PID"
      [[ $2 =~ ^[0-9]+$ && $2 -gt 1 ]] || usage "bad PID $2 (as seen in the machine, not 1)"
      need_running "$1"
      # The pid is the machine's: sent from inside its PID namespace.
      nsenter --target "$PID" --pid -- sh -c 'kill -s "$0" "$1"' \
        "$([[ $cmd == stop ]] && echo STOP || echo CONT)" "$2" ;;
    clock)
      (($# == 2)) || usage "clock NAME SECONDS"
      [[ $2 =~ ^[+-]?[0-9]+$ ]] && (($2 >= -3600 && $2 <= 3600)) ||
        usage "clock: SECONDS from -3600 to 3600, not $2"
      need_machine "$1"
      rm -f "$STATE/m/$1/clock"
      (($2 == 0)) || echo $(($2)) >"$STATE/m/$1/clock" ;;
    db-up) need_machine db && lock_owner && db_up "$@" ;;
    db-down) need_machine db && lock_owner && db_down ;;
    db-crash) need_machine db && lock_owner && pg_stop immediate && pg_start ;;
    info) cmd_info ;;
    cleanup) lock_root && cleanup_dead && remove_root ;;
    *) usage "unknown command $cmd" ;;
  esac
}

main "$@"
