# shellcheck shell=bash
# machines_lib.sh: the processes, namespaces, freezer and owners of
# tests/machines/machines.sh (sourced by it; see there). Uses its globals:
# ROOT, OWNER, STATE, FREEZER, FREEZER_DIR, and its usage and fail.

# Sleeps $1 seconds without starting a process (a read that times out).
nap() {
  [[ -n ${NAP_FD:-} ]] || exec {NAP_FD}<> <(:)
  read -rt "$1" -u "$NAP_FD" _ || true
}

# Sets START to the start time of process $1 (field 22 of its stat), empty
# if it is gone.
get_start() {
  START=''
  local s
  read -r s 2>/dev/null <"/proc/$1/stat" || return 0
  s=${s##*) }
  # shellcheck disable=SC2086
  set -- $s
  START=${20}
}

# Whether process $1 still is the one that started at $2.
alive() { get_start "$1" && [[ -n $START && $START == "$2" ]]; }

# Whether process $1 runs (is there and not a zombie).
running() {
  local s
  read -r s 2>/dev/null <"/proc/$1/stat" || return 1
  s=${s##*) }
  [[ ${s:0:1} != Z ]]
}

# Sets PID to a child of process $1 (empty if none).
get_child() {
  local f s
  PID=''
  read -r PID _ 2>/dev/null <"/proc/$1/task/$1/children" || true  # no newline
  [[ -z $PID && ! -e /proc/$1/task/$1/children ]] || return 0
  for f in /proc/[0-9]*/stat; do  # a kernel without CONFIG_PROC_CHILDREN
    read -r s 2>/dev/null <"$f" || continue
    s=${s##*) }
    # shellcheck disable=SC2086
    set -- $1 $s
    if [[ $3 == "$1" ]]; then PID=${f//[^0-9]/}; return 0; fi
  done
}

# Sets PID to machine $1's keeper or init ($2) if it runs, else empty.
get_pid() {
  PID=''
  local p s
  read -r p s 2>/dev/null <"$STATE/m/$1/$2" || return 0
  if alive "$p" "$s"; then PID=$p; fi
}

# Sets PIDS to every live process (not a zombie) in one of the namespaces
# given as KIND:FILE (net or pid, and a namespace file: /proc/PID/ns/KIND,
# or /dev/fd/N open on one, which outlives the namespace's processes).
get_members() {
  local p r s
  PIDS=()
  for p in /proc/[0-9]*; do
    for r; do
      [[ $p/ns/${r%%:*} -ef ${r#*:} ]] || continue
      read -r s 2>/dev/null <"$p/stat" || break
      s=${s##*) }
      [[ ${s:0:1} == Z ]] || PIDS+=("${p#/proc/}")
      break
    done
  done
}

need_machine() {
  [[ -d $STATE/m/$1 ]] || fail "no machine $1 (machines.sh up $1)"
}

need_running() {
  need_machine "$1"
  get_pid "$1" init
  [[ -n $PID ]] || fail "machine $1 is not running"
}

# --- freezer -------------------------------------------------------------

# Prints how this owner's machines are frozen: "cgroup2 DIR", "freezer DIR"
# (v1) or "signals".
pick_freezer() {
  local want=${WIZQ_MACHINES_FREEZER:-} kind dir probe
  for kind in cgroup2 freezer; do
    [[ -z $want || $want == "$kind" ]] || continue
    if [[ $kind == cgroup2 ]]; then
      dir=$(awk '/ - cgroup2 / { print $5; exit }' /proc/self/mountinfo)
      probe=cgroup.freeze
    else
      dir=$(awk '/ - cgroup .*[ ,]freezer/ { print $5; exit }' /proc/self/mountinfo)
      probe=freezer.state
    fi
    if [[ -n $dir ]] && mkdir -p "$dir/wizq-machines" 2>/dev/null &&
      [[ -e $dir/wizq-machines/$probe ]]; then
      echo "$kind $dir/wizq-machines/$OWNER"
      return
    fi
  done
  [[ -z $want || $want == signals ]] || fail "no $want freezer here"
  echo signals
}

# Moves process $2 into machine $1's cgroup.
join_cgroup() {
  [[ $FREEZER == signals ]] || echo "$2" >"$FREEZER_DIR/$1/cgroup.procs"
}

# Freezes ($2 = 1) or thaws ($2 = 0) machine $1, and waits until it is so.
set_frozen() {
  local name=$1 on=$2 cg=$FREEZER_DIR/$1 state p i stopped
  local want=THAWED sig=CONT
  ((on)) && want=FROZEN sig=STOP
  for ((i = 0; i < 1000; i++)); do
    case $FREEZER in
      cgroup2)
        echo "$on" >"$cg/cgroup.freeze"
        state=''
        while read -r p state; do [[ $p == frozen ]] && break; done <"$cg/cgroup.events"
        [[ $state != "$on" ]] || break ;;
      freezer)
        echo "$want" >"$cg/freezer.state"
        read -r state <"$cg/freezer.state"
        [[ $state == "$want" ]] && break ;;
      signals)  # until every process is stopped (new ones too)
        get_pid "$name" init
        PIDS=()
        [[ -z $PID ]] || get_members "pid:/proc/$PID/ns/pid"
        stopped=1
        for p in "${PIDS[@]}"; do
          kill -s "$sig" "$p" 2>/dev/null || true
          read -r state 2>/dev/null <"/proc/$p/stat" || continue
          state=${state##*) }
          ((!on)) || [[ ${state:0:1} == [tT] ]] || stopped=0
        done
        ((!stopped)) || break ;;
    esac
    nap 0.01
  done
  ((i < 1000)) || fail "machine $name did not become $want"
  if ((on)); then : >"$STATE/m/$name/frozen"; else rm -f "$STATE/m/$name/frozen"; fi
}

# --- owners and cleanup --------------------------------------------------

# Takes the lock of all owners: the root directory itself, checked to be
# the current one after the wait (a holder that finished may remove it).
lock_root() {
  local a b
  while :; do
    mkdir -p "$ROOT"
    exec 8<"$ROOT"
    flock 8
    a=$(stat -L -c %i /dev/fd/8)
    b=$(stat -c %i "$ROOT" 2>/dev/null) || true
    [[ $a == "$b" ]] && return
    exec 8<&-
  done
}

# Removes the root directory and the shared cgroup directories when no
# owner uses them any more.
remove_root() {
  local dir
  for dir in $(awk '/ - cgroup2? / { print $5 }' /proc/self/mountinfo); do
    rmdir "$dir/wizq-machines" 2>/dev/null || true
  done
  rmdir "$ROOT" 2>/dev/null || true
}

# Creates this owner's state directory (under the root lock, so that one
# without its owner file is a setup killed right then).
ensure_owner() {
  [[ ! -d $STATE ]] || return 0
  get_start "$OWNER"
  [[ -n $START ]] || usage "owner $OWNER is not a running process (WIZQ_MACHINES_OWNER)"
  mkdir -p "$STATE/m"
  echo "$OWNER $START" >"$STATE/owner.new"
  mv "$STATE/owner.new" "$STATE/owner"
  pick_freezer >"$STATE/freezer.new"
  mv "$STATE/freezer.new" "$STATE/freezer"
  read -r FREEZER FREEZER_DIR <"$STATE/freezer"
}

# Prints "pid owner start" for every keeper: named wizq-machines:OWNER:
# START:NAME from its exec of sleep on, that name its last argument before
# (while setsid, unshare and bash run).
scan_keepers() {
  local f a owner start
  for f in /proc/[0-9]*/cmdline; do
    mapfile -d '' -t a 2>/dev/null <"$f" || continue
    ((${#a[@]} > 0)) || continue
    if [[ ${a[0]} == wizq-machines:* ]]; then
      a=("${a[0]}")
    elif [[ ${a[-1]} != wizq-machines:* || ! ${a[0]##*/} =~ ^(setsid|unshare|bash)$ ]]; then
      continue
    fi
    IFS=: read -r _ owner start _ <<<"${a[-1]}"
    f=${f#/proc/}
    echo "${f%/cmdline} $owner $start"
  done
}

# Whether owner $1 runs: as its owner file says, or (none written yet) as
# its keepers' names say.
owner_alive() {
  local pid start
  if read -r pid start 2>/dev/null <"$ROOT/$1/owner"; then
    alive "$pid" "$start"
    return
  fi
  start=$(scan_keepers | awk -v o="$1" '$2 == o { print $3; exit }')
  [[ -n $start ]] && alive "$1" "$start"
}

# Removes everything of owner $1: every process of its machines' network
# and PID namespaces (keepers found by name, so also those of a setup
# killed before it wrote them down; keepers last, as they hold the network
# namespaces), its cgroups, its cluster directory, its state.
teardown_owner() {
  local owner=$1 st=$ROOT/$1 keepers=() refs=() fds=() kind='' dir='' f p s i
  if read -r kind dir 2>/dev/null <"$st/freezer" && [[ $kind != signals ]]; then
    for p in "$dir"/*/; do  # thawed, frozen processes can die
      [[ $kind == cgroup2 ]] && echo 0 >"$p/cgroup.freeze"
      [[ $kind != freezer ]] || echo THAWED >"$p/freezer.state"
    done 2>/dev/null
  fi
  read -ra keepers < <(scan_keepers | awk -v o="$owner" '$2 == o { printf "%s ", $1 }') || true
  for p in "${keepers[@]}"; do refs+=("net:/proc/$p/ns/net"); done
  for f in "$st"/m/*/init; do
    read -r p s 2>/dev/null <"$f" && alive "$p" "$s" || continue
    exec {i}<"/proc/$p/ns/pid"  # the namespace outlives its init
    fds+=("$i")
    refs+=("pid:/dev/fd/$i")
  done
  ((${#refs[@]} == 0)) || kill_members "${keepers[*]}" "${refs[@]}"
  for i in "${fds[@]}"; do exec {i}<&-; done
  ((${#keepers[@]} == 0)) || kill -9 "${keepers[@]}" 2>/dev/null || true
  for p in "${keepers[@]}"; do while running "$p"; do nap 0.01; done; done
  if [[ -n $dir ]]; then
    for p in "$dir"/*/; do [[ ! -d $p ]] || rmdir "$p"; done
    rmdir "$dir" 2>/dev/null || true
  fi
  if read -r dir _ 2>/dev/null <"$st/m/db/cluster"; then rm -rf "$dir"; fi
  rm -rf "$st"
}

# kill_members "SPARED..." REFS...: kill -9 every member of the namespaces
# REFS (as get_members) but the pids SPARED, until none is left.
kill_members() {
  local spared=" $1 " i p victims
  shift
  for ((i = 0; i < 1000; i++)); do
    get_members "$@"
    victims=()
    for p in "${PIDS[@]}"; do [[ $spared == *" $p "* ]] || victims+=("$p"); done
    ((${#victims[@]} > 0)) || return 0
    kill -9 "${victims[@]}" 2>/dev/null || true
    nap 0.01
  done
  fail "processes would not die: ${victims[*]}"
}

cleanup_dead() {
  local o
  for o in $( (ls "$ROOT" 2>/dev/null; scan_keepers | cut -d' ' -f2) | grep -xE '[0-9]+' | sort -u); do
    owner_alive "$o" || teardown_owner "$o"
  done
}

# Takes this owner's lock for the rest of the command.
lock_owner() {
  exec 9>"$STATE/lock"
  flock 9
}
