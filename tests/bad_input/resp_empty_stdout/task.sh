cat >/dev/null
