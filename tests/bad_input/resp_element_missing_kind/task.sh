cat >/dev/null
echo '[{"value":{"n":1}}]'
