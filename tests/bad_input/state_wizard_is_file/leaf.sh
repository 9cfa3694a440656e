# Sourced by the task's shell, so $PPID is the task's supervisor and its
# parent is wizq. With CRASH set in the
# environment, leaf 3 SIGKILLs wizq (a crash in the middle of a run).
v=$(cat)
case "$v" in
  *'"i":3'*) if [ -n "$CRASH" ]; then kill -9 "$(cut -d" " -f4 /proc/$PPID/stat)"; kill -9 $$; fi ;;
esac
echo '[]'
