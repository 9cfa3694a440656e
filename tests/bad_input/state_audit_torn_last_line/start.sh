# Spawns three leaves.
cat >/dev/null
echo '[{"kind":"Leaf","value":{"i":1}},{"kind":"Leaf","value":{"i":2}},{"kind":"Leaf","value":{"i":3}}]'
