#!/bin/sh
# packaging_install (ctest fixture wizq_installed): installs the build into a
# fresh PREFIX with `cmake --install` (a copy; nothing is compiled) and checks
# the layout docs/INSTALL.md promises.
#
# usage: install.sh BUILD_DIR PREFIX LIBDIR VERSION SOVERSION HEADER...
# Environment: WIZQ_CMAKE (default cmake).
set -u
build=$1 prefix=$2 libdir=$3 version=$4 soversion=$5
shift 5
cmake=${WIZQ_CMAKE:-cmake}
fail() { echo "packaging_install: $*" >&2; exit 1; }

rm -rf "$prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$prefix.log" 2>&1 ||
  { cat "$prefix.log" >&2; fail "cmake --install $build --prefix $prefix failed"; }

lib=$prefix/$libdir
for f in bin/wizq "$libdir/libwizq.a" "$libdir/libwizq.so.$version" \
    "$libdir/cmake/wizq/wizqConfig.cmake" \
    "$libdir/cmake/wizq/wizqConfigVersion.cmake" \
    "$libdir/cmake/wizq/wizqTargets.cmake" \
    "$libdir/cmake/wizq/wizqStaticTargets.cmake" \
    "$libdir/pkgconfig/wizq.pc" share/man/man1/wizq.1 share/man/man1/wizq-run.1 \
    share/man/man1/wizq-agent-take.1 share/bash-completion/completions/wizq \
    share/fish/vendor_completions.d/wizq.fish; do
  [ -f "$prefix/$f" ] || fail "$prefix/$f was not installed"
done
# zsh's: vendor-completions for a build configured for /usr, else
# site-functions.
ls "$prefix"/share/zsh/*/_wizq >/dev/null 2>&1 ||
  fail "$prefix/share/zsh/*/_wizq was not installed"
[ "$(readlink "$lib/libwizq.so")" = "libwizq.so.$soversion" ] ||
  fail "$lib/libwizq.so should link to libwizq.so.$soversion"
[ "$(readlink "$lib/libwizq.so.$soversion")" = "libwizq.so.$version" ] ||
  fail "$lib/libwizq.so.$soversion should link to libwizq.so.$version"
soname=$(readelf -d "$lib/libwizq.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libwizq.so.$soversion" ] ||
  fail "SONAME of libwizq.so.$version is '$soname', not libwizq.so.$soversion"
# No build-tree path may leak into the installed files.
if grep -rl "$build" "$lib/cmake/wizq" "$lib/pkgconfig" >/dev/null 2>&1; then
  fail "installed package files name the build directory $build: $(grep -rl "$build" "$lib/cmake/wizq" "$lib/pkgconfig")"
fi
n=0
for h in "$@"; do
  n=$((n + 1))
  cmp -s "$h" "$prefix/include/wizq/$(basename "$h")" ||
    fail "$h is not installed as $prefix/include/wizq/$(basename "$h")"
done
installed=$(ls "$prefix/include/wizq" | wc -l)
[ "$installed" -eq "$n" ] ||
  fail "$installed headers in $prefix/include/wizq, $n in include/wizq"
"$prefix/bin/wizq" --version >/dev/null || fail "$prefix/bin/wizq --version failed"
echo "packaging_install: $prefix: wizq $version, SONAME $soname, $n public headers"
