cat >/dev/null
printf '[{"kind":"Item","value":{"n":1,"d":'
i=0; while [ $i -lt 10000 ]; do printf '['; i=$((i+1)); done
i=0; while [ $i -lt 10000 ]; do printf ']'; i=$((i+1)); done
printf '}}]'
