cat >/dev/null
echo '[{"kind":"Item","value":{"n":1},"priority":9}]'
