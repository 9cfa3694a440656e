cat >/dev/null
echo '[{"kind":"Item","value":{"n":1}},{"kind":"Other","value":{}}]'
