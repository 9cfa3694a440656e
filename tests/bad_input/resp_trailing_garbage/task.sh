cat >/dev/null
echo '[] [1]'
