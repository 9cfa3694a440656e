#!/bin/sh
# The public headers, seen from outside: each translation unit includes one
# installed header (twice: the include guard) and nothing else.
#
# usage: headers.sh alone PREFIX TU...
#   packaging_headers_alone: each TU compiles (C++17, -Wall -Wextra -Werror)
#   with only PREFIX/include on the include path: the header includes what
#   it uses and uses nothing that is not installed.
# usage: headers.sh private PREFIX TU...
#   packaging_headers_private: no public header names, or includes even
#   indirectly, simdjson, nlohmann, valijson, CLI11, xxhash or Boost.
# usage: headers.sh names PREFIX TU...
#   packaging_headers_names: every `Wizard::NAME` a public header writes
#   (its comments included) is a member wizard.h declares: a comment never
#   points a reader at a call that does not exist.
# Environment: CXX (default c++).
set -u
mode=$1 prefix=$2
shift 2
cxx=${CXX:-c++}
failed=0
[ $# -gt 0 ] || { echo "headers.sh: no public header" >&2; exit 1; }
for tu in "$@"; do
  name=$(sed -n 's/#include "\(.*\)"/\1/p' "$tu" | head -1)
  case $mode in
    alone)
      if ! "$cxx" -std=c++17 -Wall -Wextra -Werror -fsyntax-only \
          -I"$prefix/include" "$tu"; then
        echo "FAIL: $name does not compile alone (only $prefix/include)" >&2
        failed=1
      fi ;;
    private)
      bad=$(grep -nE '#[[:space:]]*include[[:space:]]*[<"](simdjson|nlohmann|valijson|CLI|xxhash|boost)' \
            "$prefix/include/$name"; \
            sed 's://.*$::' "$prefix/include/$name" |
              grep -nE '(simdjson|nlohmann|valijson|CLI|XXH|boost)::|XXH[0-9A-Za-z_]*_t')
      # Everything the header pulls in, transitively.
      deps=$("$cxx" -std=c++17 -M -I"$prefix/include" "$tu") ||
        { echo "FAIL: $name: cannot list its includes" >&2; failed=1; continue; }
      bad="$bad$(printf '%s\n' "$deps" | tr ' ' '\n' |
        grep -E '(simdjson|nlohmann|valijson|/CLI/|CLI11|xxhash|boost)')"
      if [ -n "$bad" ]; then
        echo "FAIL: $name exposes a private dependency:" >&2
        printf '%s\n' "$bad" >&2
        failed=1
      fi ;;
    names)
      for member in $(grep -oE 'Wizard::[A-Za-z_][A-Za-z0-9_]*' \
                        "$prefix/include/$name" | sed 's/^Wizard:://' | sort -u); do
        if ! grep -qE "[ *&]$member\(" "$prefix/include/wizq/wizard.h"; then
          echo "FAIL: $name names Wizard::$member, which wizard.h does not declare" >&2
          failed=1
        fi
      done ;;
    *) echo "headers.sh: unknown mode $mode" >&2; exit 2 ;;
  esac
done
[ $failed -eq 0 ] && echo "headers.sh $mode: $# public headers ok"
exit $failed
