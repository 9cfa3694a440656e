cat >/dev/null
setsid sleep 15 &
echo '[]'
