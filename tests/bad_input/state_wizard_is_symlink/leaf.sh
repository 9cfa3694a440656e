# Sourced by the task's shell, so $PPID is wizq. With CRASH set in the
# environment, leaf 3 SIGKILLs wizq (a crash in the middle of a run).
v=$(cat)
case "$v" in
  *'"i":3'*) if [ -n "$CRASH" ]; then kill -9 "$PPID"; exit 0; fi ;;
esac
echo '[]'
