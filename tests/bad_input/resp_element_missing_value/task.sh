cat >/dev/null
echo '[{"kind":"Item"}]'
