#!/bin/sh
# The finally hook of finally.jsonc's Root; what it does depends on the
# run's scenario (the Root's value, which the hook receives).
set -eu
in=$(cat)
scenario=$(printf '%s' "$in" | jq -r '.value.scenario')
step="$(dirname "$0")/../step.sh"
case $scenario in
  nested) args='hook-root [{kind:"Z",value:{z:1}},{kind:"Z",value:{z:2}}]' ;;
  hook_retry) args='-f 1 hook-root' ;;
  hook_fails) args='-f 99 hook-root' ;;
  hook_child_fails) args='hook-root [{kind:"Bad",value:{}}]' ;;
  *) args='hook-root' ;;
esac
# shellcheck disable=SC2086  # $args is split on purpose (no spaces inside)
printf '%s' "$in" | exec "$step" -R -n 0 $args
