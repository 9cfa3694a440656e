#!/bin/sh
# Builds an outside C++ project against an installed wizq and runs it: what
# a program that embeds wizq does, from a clean build directory.
#
# usage: outside_build.sh MODE PREFIX SOURCE_DIR BUILD_DIR -- PROGRAM [ARG...]
#   MODE cmake         find_package(wizq) with CMAKE_PREFIX_PATH=PREFIX;
#                      wizq::wizq is the shared library
#        cmake-static  the same with -Dwizq_USE_STATIC_LIBS=ON (libwizq.a;
#                      tests/packaging/consumer links all of it)
#        pc            pkg-config --cflags --libs wizq: SOURCE_DIR/*.cc
#                      compiled and linked with the shared library
#        pc-static     pkg-config --static: all of libwizq.a (whole
#                      archive) plus Libs.private and Requires.private
#   PROGRAM is the executable the project builds (BUILD_DIR/PROGRAM); it is
#   run with ARGs and stdin from /dev/null and must exit 0. The shared modes
#   check it resolves libwizq.so from PREFIX, the static ones that it does
#   not need libwizq.so at all.
# A SOURCE_DIR without CMakeLists.txt is skipped (exit 77). In pc mode,
# BUILD_DIR/gen/wizq_all_headers.h includes every installed public header
# (the CMake consumer makes the same file itself).
# Environment: WIZQ_CMAKE (default cmake), CXX (default c++), WIZQ_JOBS (2).
set -u
mode=$1 prefix=$2 src=$3 build=$4
[ "$5" = "--" ] || { echo "usage: $0 MODE PREFIX SRC BUILD -- PROGRAM [ARG...]" >&2; exit 2; }
program=$6
shift 6
cmake=${WIZQ_CMAKE:-cmake}
cxx=${CXX:-c++}
jobs=${WIZQ_JOBS:-2}
fail() { echo "outside_build $mode $src: $*" >&2; exit 1; }

if [ ! -f "$src/CMakeLists.txt" ]; then
  echo "outside_build: $src/CMakeLists.txt does not exist: skipped"
  exit 77
fi
[ -d "$prefix" ] || fail "$prefix does not exist (install wizq there first)"
prefix=$(cd "$prefix" && pwd -P)
rm -rf "$build" && mkdir -p "$build" || fail "cannot create $build"

case $mode in
  cmake|cmake-static)
    static=OFF
    [ "$mode" = cmake-static ] && static=ON
    "$cmake" -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$prefix" \
        -Dwizq_USE_STATIC_LIBS=$static >"$build/configure.log" 2>&1 ||
      { cat "$build/configure.log" >&2; fail "cmake configure failed"; }
    found=$(sed -n 's/^wizq_DIR:PATH=//p' "$build/CMakeCache.txt")
    case $found in
      "$prefix"/*) ;;
      *) fail "find_package found wizq in '$found', not under $prefix" ;;
    esac
    "$cmake" --build "$build" -j"$jobs" >"$build/build.log" 2>&1 ||
      { cat "$build/build.log" >&2; fail "cmake --build failed"; } ;;
  pc|pc-static)
    pcdir=$(dirname "$(find "$prefix" -name wizq.pc | head -1)")
    [ -f "$pcdir/wizq.pc" ] || fail "no wizq.pc under $prefix"
    PKG_CONFIG_PATH=$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
    export PKG_CONFIG_PATH
    includedir=$(pkg-config --variable=includedir wizq) ||
      fail "pkg-config wizq failed"
    mkdir -p "$build/gen"
    for h in "$includedir"/wizq/*.h; do
      echo "#include \"wizq/$(basename "$h")\""
    done >"$build/gen/wizq_all_headers.h"
    cflags=$(pkg-config --cflags wizq) || fail "pkg-config --cflags wizq failed"
    if [ "$mode" = pc ]; then
      libs="$(pkg-config --libs wizq) -Wl,-rpath,$(pkg-config --variable=libdir wizq)" ||
        fail "pkg-config --libs wizq failed"
    else
      # -lwizq would pick libwizq.so next to libwizq.a: name the archive,
      # and link all of it, so that every dependency of every object must
      # come from Libs.private and Requires.private, whatever the program
      # happens to call.
      libs=$(pkg-config --static --libs wizq | sed 's/-lwizq\b/-Wl,--whole-archive -l:libwizq.a -Wl,--no-whole-archive/') ||
        fail "pkg-config --static --libs wizq failed"
    fi
    echo "$cxx -std=c++17 $cflags -I$build/gen -I$src $src/*.cc -o $build/$program $libs" \
      >"$build/build.log"
    # shellcheck disable=SC2086
    "$cxx" -std=c++17 -O1 $cflags -I"$build/gen" -I"$src" "$src"/*.cc \
        -o "$build/$program" $libs >>"$build/build.log" 2>&1 ||
      { cat "$build/build.log" >&2; fail "compile and link with pkg-config failed"; } ;;
  *) echo "outside_build: unknown mode $mode" >&2; exit 2 ;;
esac

exe=$build/$program
[ -x "$exe" ] || fail "$exe was not built"
needed=$(readelf -d "$exe" | sed -n 's/.*(NEEDED).*\[\(libwizq[^]]*\)\].*/\1/p')
case $mode in
  *-static)
    [ -z "$needed" ] || fail "$exe should not need $needed (static link)" ;;
  *)
    [ -n "$needed" ] || fail "$exe does not need libwizq.so (shared link)"
    resolved=$(ldd "$exe" | sed -n 's/.*libwizq[^ ]* => \([^ ]*\) .*/\1/p')
    case $(realpath "$resolved" 2>/dev/null) in
      "$prefix"/*) ;;
      *) fail "$exe loads libwizq from '$resolved', not from $prefix" ;;
    esac ;;
esac
"$exe" "$@" </dev/null || fail "$exe $* exited with status $?"
echo "outside_build $mode: $src built and ran against $prefix${needed:+ ($needed)}"
