#!/bin/bash
# Inside the Debian root of deb_test.sh, after `apt install ./wizq_*.deb
# ./libwizq0_*.deb ./libwizq-dev_*.deb`: what a user does with the
# packages. Run from the directory holding this script, the other scripts
# of tests/packaging/ and its consumer/.
#
# usage: deb_installed.sh VERSION
# Exit 0 when every check passed; each failure is named.
set -u
version=$1
here=$(pwd)
failed=0
check() {  # check WHAT COMMAND...: runs COMMAND, names WHAT if it fails
  local what=$1
  shift
  if "$@" >"$here/check.log" 2>&1; then
    echo "ok   $what"
  else
    echo "FAIL $what:"
    tail -n 40 "$here/check.log" | sed 's/^/  > /'
    failed=$((failed + 1))
  fi
}

check "wizq --version says wizq $version" \
  sh -c "[ \"\$(wizq --version)\" = 'wizq $version' ]"

# The installer example, copied as a user would.
mkdir -p "$here/user" && cd "$here/user" || exit 1
check "wizq run of the installed installer example" sh -c '
  cp -r /usr/share/doc/wizq/examples/installer . &&
  wizq run installer/workflow.jsonc --dir install </dev/null &&
  grep -q "^installed zlib 1.3.1$" install/SUMMARY.txt'
cd "$here" || exit 1

check "man -w wizq-run finds the installed page" \
  sh -c '[ "$(man -w wizq-run)" = /usr/share/man/man1/wizq-run.1.gz ]'
check "man renders wizq(1) and finds every command's page" sh -c '
  man -P cat -l "$(man -w wizq)" | grep -q "wizq - a crash-resumable task-queue orchestrator" &&
  for c in $(wizq --help | sed -n "/^Subcommands:/,\$s/^  \([a-z]*\) .*/\1/p"); do
    man -w "wizq-$c" >/dev/null || { echo "no page wizq-$c"; exit 1; }
  done'
check "the examples of every man page" sh man_examples.sh /usr/share/man/man1

# A program built against the -dev package: find_package(wizq) (shared and
# static) and pkg-config, with what the packages' Depends brought.
for mode in cmake cmake-static pc pc-static; do
  check "consumer built with $mode against the installed libwizq-dev" \
    sh outside_build.sh $mode /usr "$here/consumer" "$here/consumer-$mode" \
    -- wizq-consumer --dir "$here/consumer-$mode/run"
done

check "completion in bash, zsh and fish where the package put it" \
  sh completion_shells.sh installed /usr/share/doc/wizq/examples

echo "deb_installed: $failed failed"
[ $failed -eq 0 ]
