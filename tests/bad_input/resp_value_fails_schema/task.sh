cat >/dev/null
echo '[{"kind":"Item","value":{"n":"seven"}}]'
