cat >/dev/null
sleep 30 &
echo '[]'
