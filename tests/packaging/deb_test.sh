#!/bin/bash
# The Debian packages as a user gets them (SPEC §16; docs/INSTALL.md,
# "Debian packages"), run by ctest as deb_test:
#
#  1. `make deb` builds wizq, libwizq0 and libwizq-dev, and lintian checks
#     them: no error (the warnings left are explained in docs/INSTALL.md).
#  2. Meanwhile, a bare Debian 12 root: debootstrap --variant=minbase
#     bookworm from the Debian mirror the host's apt uses (its sources are
#     copied in), plus what a user needs to build a C++ program and to use
#     their shells: cmake, g++, make, man-db, bash-completion, zsh, fish
#     and tmux (installed once, before anything is measured).
#  3. A listing of its files (find / -xdev), then `apt install
#     ./wizq_*.deb ./libwizq0_*.deb ./libwizq-dev_*.deb`: every dependency
#     must come from the packages' Depends (and jq, for the examples, from
#     Recommends).
#  4. Inside it, deb_installed.sh: wizq --version, wizq run of the installed
#     example copied as a user would, man -w wizq-run, every man page's
#     examples, a consumer built with find_package(wizq) and pkg-config,
#     completion in bash, zsh and fish through tmux.
#  5. apt purge --autoremove of the three, then the same listing again: it
#     must equal the first, dpkg's and apt's logs aside.
# Whatever happens, the processes left in the root are killed, its mounts
# undone and the root removed.
#
# usage: deb_test.sh SOURCE_DIR WORK_DIR
# Needs root (debootstrap, chroot, mount) and the packages of `make
# test-deps`; exit 77 (skipped) when not root.
set -u
src=$(cd "$1" && pwd) work=$2
jobs=${WIZQ_JOBS:-2}
if [ "$(id -u)" != 0 ]; then
  echo "deb_test: needs root (debootstrap, chroot): skipped"
  exit 77
fi
for tool in debootstrap lintian dpkg-buildpackage chroot; do
  command -v $tool >/dev/null ||
    { echo "deb_test: $tool is not installed (make test-deps)"; exit 1; }
done
version=$(sed -n 's/^project(wizq VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
# The root lives outside the build directory: tests that walk the build
# directory must not meet its /proc.
root=/tmp/wizq-deb-test-root
root_pid=

phase_start=$(date +%s)
phase() {  # prints how long the previous phase took, then names the next
  local now
  now=$(date +%s)
  echo "== [$((now - phase_start)) s] $*"
  phase_start=$now
}
fail() { echo "deb_test: FAIL: $*"; exit 1; }

# Kills what runs inside the root (by pid), undoes its mounts, removes it.
cleanup() {
  [ -n "$root_pid" ] && kill -TERM -- "-$root_pid" 2>/dev/null
  [ -d "$root" ] || return 0
  local p
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && kill -KILL "${p#/proc/}" 2>/dev/null
  done
  awk -v r="$root" 'index($2, r "/") == 1 {print $2}' /proc/mounts | sort -r |
    while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
  if awk -v r="$root" 'index($2, r "/") == 1 {f = 1} END {exit !f}' /proc/mounts; then
    echo "deb_test: $root still has mounts; not removed"
  else
    rm -rf --one-file-system "$root"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

in_root() { chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
  PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }

# The Debian mirror of the host's apt sources (deb822 or one-line).
mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null |
  sed -n 's|^URIs: *\(http[^ ]*/debian\)/\{0,1\} *$|\1|p' | head -n 1)
[ -n "$mirror" ] || mirror=$(sed -n 's|^deb  *\(http[^ ]*/debian\)/\{0,1\} .*|\1|p' \
  /etc/apt/sources.list 2>/dev/null | head -n 1)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian

# Step 2, in the background: the bare root and what a user has on it.
make_root() {
  debootstrap --variant=minbase bookworm "$root" "$mirror" ||
    { echo "debootstrap failed"; return 1; }
  # The host's Debian sources (security and updates too), so that the
  # packages' dependencies resolve as on the host.
  local f copied=
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    grep '^URIs:' "$f" | grep -qv 'debian' && continue
    cp "$f" "$root/etc/apt/sources.list.d/" && copied=1
  done
  [ -n "$copied" ] && rm -f "$root/etc/apt/sources.list"
  mount -t proc proc "$root/proc" &&
    mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$root/dev/pts" &&
    mount --bind "$root/dev/pts/ptmx" "$root/dev/ptmx" || { echo "mount failed"; return 1; }
  in_root apt-get update -q -o Acquire::Check-Valid-Until=false &&
    in_root apt-get install -y -q --no-install-recommends \
      cmake g++ make man-db bash-completion zsh fish tmux
}

mkdir -p "$work" || fail "cannot create $work"
cleanup
rm -rf "$work/deb" "$work/debs"
phase "making the Debian 12 root in $root from $mirror (log: $work/root.log)," \
  "while the packages build"
setsid bash -c "$(declare -f make_root in_root); root=$root mirror=$mirror make_root" \
  >"$work/root.log" 2>&1 &
root_pid=$!

# Step 1. The packages are built as `make deb` builds them, but with the
# standard Debian build options noopt (-O0) and noautodbgsym, and without
# -g: what this test checks is the packaging, not the optimizer, and that
# halves the compile time.
env -u MAKEFLAGS -u MAKELEVEL -u MFLAGS DEB_BUILD_OPTIONS="noopt noautodbgsym" \
    DEB_CFLAGS_STRIP=-g DEB_CXXFLAGS_STRIP=-g \
    make -C "$src" --no-print-directory deb \
    BUILD="$work/build" DEB_BUILD="$work/deb" DEB_OUT="$work/debs" JOBS="$jobs" ||
  fail "make deb failed"
debs="$work/debs/wizq_${version}_amd64.deb $work/debs/libwizq0_${version}_amd64.deb $work/debs/libwizq-dev_${version}_amd64.deb"
for d in $debs; do [ -f "$d" ] || fail "make deb did not make $d"; done
phase "lintian"
# shellcheck disable=SC2086
lintian --fail-on error --display-info --tag-display-limit 0 $debs 2>&1 |
  tee "$work/lintian.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "lintian reports errors (E:) on the packages"

phase "waiting for the root"
wait "$root_pid"
status=$?
root_pid=
[ $status -eq 0 ] || { tail -n 30 "$work/root.log"; fail "making the root failed"; }

phase "listing the root, then apt install of the packages"
listing() { in_root find / -xdev | LC_ALL=C sort; }
# man-db's cache directories get their CACHEDIR.TAG the first time its
# trigger runs mandb (any package with man pages fires it): run it now, so
# that the listing before already has them. (The pages are rendered with
# `man -l`, which keeps no formatted copy in /var/cache/man.)
in_root mandb -q >/dev/null 2>&1
listing >"$work/before.txt"
t=/tmp/wizq-deb-test
mkdir -p "$root$t" && cp $debs "$root$t/" &&
  cp "$src"/tests/packaging/{deb_installed,man_examples,completion_shells,outside_build}.sh \
     "$root$t/" && cp -r "$src/tests/packaging/consumer" "$root$t/" ||
  fail "cannot copy into the root"
in_root sh -c "cd $t && apt install -y ./wizq_*.deb ./libwizq0_*.deb ./libwizq-dev_*.deb" \
  >"$work/install.log" 2>&1 || { tail -n 30 "$work/install.log"; fail "apt install failed"; }
grep -E '^(Setting up|Unpacking) ' "$work/install.log" | sed 's/^/  /'

phase "using the packages (deb_installed.sh)"
in_root sh -c "cd $t && TMPDIR=$t bash deb_installed.sh $version"
installed=$?

phase "apt purge --autoremove, then listing the root again"
in_root apt purge -y --autoremove wizq libwizq0 libwizq-dev >"$work/purge.log" 2>&1 ||
  { tail -n 30 "$work/purge.log"; fail "apt purge failed"; }
rm -rf "$root$t"
listing >"$work/after.txt"
# dpkg's and apt's logs grow; nothing else may differ.
logs='^/var/log/(dpkg\.log|apt/.*)$'
diff <(grep -Ev "$logs" "$work/before.txt") <(grep -Ev "$logs" "$work/after.txt") \
  >"$work/listing.diff"
if [ -s "$work/listing.diff" ]; then
  echo "the files of the root before the install and after the purge differ:"
  head -n 40 "$work/listing.diff"
  fail "install and purge did not leave the root as it was"
fi
echo "ok   the root after the purge has the same $(wc -l <"$work/after.txt") files as before"
[ $installed -eq 0 ] || fail "deb_installed.sh: see above"
phase "deb_test: passed"
