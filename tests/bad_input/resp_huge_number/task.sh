cat >/dev/null
echo '[{"kind":"Item","value":{"n":1e999}}]'
