cat >/dev/null
printf '[{"kind":"Item","value":{"n":1,"s":"\303\050\377"}}]'
