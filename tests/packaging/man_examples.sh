#!/bin/sh
# Runs the EXAMPLES of every man page as a user would type them.
#
# usage: man_examples.sh MANDIR [EXAMPLES_DIR]
#   MANDIR        the pages, NAME.1 or NAME.1.gz (build/man, or
#                 /usr/share/man/man1 where the package installed them:
#                 then only the wizq*.1.gz ones are read)
#   EXAMPLES_DIR  where the examples are, in place of
#                 /usr/share/doc/wizq/examples (a source tree's examples/)
#
# The examples of a page are the lines of its EXAMPLES section between .nf
# and .fi, unescaped from roff; a line "$ CMD" is a command, any other line
# continues the one before (a here-document). Each page's examples run in
# order as one bash -e script, in a fresh empty directory that is also
# HOME, with stdin from /dev/null, within 300 s; `wizq` is the one on PATH.
# A page without examples, or whose examples fail, fails the test; the
# pages of wizq db run only when WIZQ_STORE names a PostgreSQL server.
set -u
mandir=$1
examples=${2:-}
work=$(mktemp -d "${TMPDIR:-/tmp}/wizq-man-examples-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
failed=0 pages=0

# The examples of page $1 as a shell script, on stdout.
extract() {
  case $1 in *.gz) zcat "$1" ;; *) cat "$1" ;; esac |
    awk '/^\.SH /{ex = ($2 == "EXAMPLES")} ex && /^\.fi/{code = 0}
         ex && code {print} ex && /^\.nf/{code = 1}' |
    sed -e 's/\\-/-/g' -e "s/\\\\(aq/'/g" -e 's/\\(ga/`/g' \
        -e 's/\\(ti/~/g' -e 's/\\(ha/^/g' -e 's/\\&//g' -e 's/\\e/\\/g' \
        -e 's/^\$ //'
}

for page in "$mandir"/wizq*.1 "$mandir"/wizq*.1.gz; do
  [ -e "$page" ] || continue
  pages=$((pages + 1))
  name=$(basename "$page" | sed 's/\.1\(\.gz\)\{0,1\}$//')
  dir=$work/$name
  mkdir -p "$dir"
  extract "$page" > "$work/$name.sh"
  if [ -n "$examples" ]; then
    sed -i "s|/usr/share/doc/wizq/examples|$examples|g" "$work/$name.sh"
  fi
  # The examples of a command that needs a PostgreSQL server (wizq db)
  # run only where WIZQ_STORE names one.
  case $name in wizq-db*)
    if [ -z "${WIZQ_STORE:-}" ]; then
      echo "skip $name: needs a PostgreSQL server (WIZQ_STORE)"
      continue
    fi ;;
  esac
  if [ ! -s "$work/$name.sh" ]; then
    echo "FAIL $name: no examples (cli/docgen/man_text.cc)"
    failed=$((failed + 1))
    continue
  fi
  start=$(date +%s)
  if (cd "$dir" && HOME=$dir timeout 300 bash -e "$work/$name.sh") \
      </dev/null >"$work/$name.out" 2>&1; then
    echo "ok   $name ($(($(date +%s) - start)) s)"
  else
    echo "FAIL $name: its examples failed; the script:"
    sed 's/^/  | /' "$work/$name.sh"
    echo "  its output (last 30 lines):"
    tail -n 30 "$work/$name.out" | sed 's/^/  > /'
    failed=$((failed + 1))
  fi
done
if [ $pages -eq 0 ]; then
  echo "man_examples: no wizq page in $mandir"
  exit 1
fi
echo "man_examples: $pages pages, $failed failed"
[ $failed -eq 0 ]
