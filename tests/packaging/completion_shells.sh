#!/bin/sh
# wizq's completion in real shells, bash, zsh and fish, each driven through
# tmux as a person types: `wizq ru<Tab>`, `wizq run --ha<Tab>`, `wizq run
# WORKFLOW --from <Tab>` (the workflow's steps) and, in the directory of a
# paused run, `wizq answer <Tab>` (the tasks waiting for an answer).
#
# usage: completion_shells.sh MODE EXAMPLES_DIR
#   MODE host       `wizq` is the one on PATH (a build tree's); each shell
#                   loads the script `wizq completion SHELL` prints: bash
#                   sources it (without bash-completion), zsh finds it in
#                   $fpath, fish sources it
#        installed  the Debian package's: bash through bash-completion's
#                   loader, zsh's compinit and fish find the scripts where
#                   the package installed them
#   EXAMPLES_DIR    holds installer/workflow.jsonc
# Needs tmux, bash, zsh and fish; a missing one fails the test. Exit 0 when
# every case passed.
set -u
mode=$1 examples=$2
for tool in tmux bash zsh fish; do
  command -v $tool >/dev/null || { echo "completion_shells: $tool is not installed (make test-deps)"; exit 1; }
done
command -v wizq >/dev/null || { echo "completion_shells: no wizq on PATH"; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/wizq-completion-XXXXXX") || exit 1
socket=wizq-completion-$$
# tmux's socket directory inside $work, removed with it.
export TMUX_TMPDIR=$work
cleanup() {
  tmux -L "$socket" kill-server 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
failed=0

# A run paused on two confirm gates (tasks 2 and 3), in $work/run.
cat > "$work/gates.json" <<'EOF'
{"entrypoint": "Start", "steps": [
  {"name": "Start", "next": ["Ask"], "action": {"kind": "Command",
   "script": "echo '[{\"kind\": \"Ask\", \"value\": 1}, {\"kind\": \"Ask\", \"value\": 2}]'"}},
  {"name": "Ask", "next": [],
   "action": {"kind": "Prompt", "mode": "confirm", "message": "Go on?"}}]}
EOF
wizq run "$work/gates.json" --dir "$work/run" --quiet </dev/null >/dev/null 2>&1
[ $? -eq 4 ] || { echo "completion_shells: the gated run did not pause (exit 4)"; exit 1; }
workflow=$examples/installer/workflow.jsonc
[ -f "$workflow" ] || { echo "completion_shells: no $workflow"; exit 1; }

# Each shell starts in $work/run with HOME=$work/home and the prompt "$ ".
home=$work/home
mkdir -p "$home/zfunc"
if [ "$mode" = host ]; then
  wizq completion zsh > "$home/zfunc/_wizq"
  bash_load='source <(wizq completion bash)'
  fish_load='wizq completion fish | source'
else
  bash_load='. /usr/share/bash-completion/bash_completion'
  fish_load=''
fi
printf '%s\nPS1="$ "\n' "$bash_load" > "$home/bashrc"
cat > "$home/.zshrc" <<EOF
fpath=($home/zfunc \$fpath)
autoload -Uz compinit && compinit -u -D
PROMPT='\$ '
EOF
mkdir -p "$home/.config/fish"
cat > "$home/.config/fish/config.fish" <<EOF
$fish_load
function fish_prompt; echo -n '\$ '; end
set -g fish_greeting
set -g fish_autosuggestion_enabled 0
EOF

screen() { tmux -L "$socket" capture-pane -p -t t; }

# expect SHELL CASE TEXT...: waits up to 15 s for the screen to show every
# TEXT (a line exactly "$ TEXT" when TEXT starts with "$ ").
expect() {
  sh_name=$1 what=$2
  shift 2
  i=0
  while [ $i -lt 150 ]; do
    shown=$(screen | sed 's/[[:space:]]*$//')
    ok=1
    for want in "$@"; do
      case $want in
        '$ '*) printf '%s\n' "$shown" | grep -qxF -- "$want" || ok=0 ;;
        *) printf '%s\n' "$shown" | grep -qF -- "$want" || ok=0 ;;
      esac
    done
    [ $ok -eq 1 ] && { echo "ok   $sh_name: $what"; return 0; }
    sleep 0.1
    i=$((i + 1))
  done
  echo "FAIL $sh_name: $what: the screen does not show: $*"
  screen | sed 's/^/  | /'
  failed=$((failed + 1))
}

# type TEXT then Tab (twice with a second argument: bash lists only then).
# The line is cleared first, and typing waits for the bare prompt: a
# Ctrl+C that lands while the shell still computes the last completion
# (the machine is loaded) ends that completion, not the line, so it is
# sent again until the screen shows nothing but "$" (at most 10 s).
type_tab() {
  tries=0
  while :; do
    tmux -L "$socket" send-keys -t t C-c
    tmux -L "$socket" send-keys -t t C-l
    sleep 0.3
    last=$(screen | sed 's/[[:space:]]*$//' | grep -v '^$' | tail -n 1)
    [ "$last" = '$' ] && break
    tries=$((tries + 1))
    [ $tries -ge 30 ] && break
  done
  tmux -L "$socket" send-keys -t t -l "$1"
  tmux -L "$socket" send-keys -t t Tab
  [ $# -gt 1 ] && { sleep 0.5; tmux -L "$socket" send-keys -t t Tab; }
}

for sh in bash zsh fish; do
  # A tmux server of its own per shell: the previous shell's server exits
  # on its own after kill-session, and a new session sent to it while it
  # exits fails with "server exited unexpectedly".
  socket=wizq-completion-$$-$sh
  case $sh in
    bash) cmd="bash --noprofile --rcfile $home/bashrc -i" ;;
    zsh) cmd="zsh -i" ;;
    fish) cmd="fish -i" ;;
  esac
  tmux -L "$socket" -f /dev/null new-session -d -s t -x 200 -y 50 -c "$work/run" \
    "env HOME=$home ZDOTDIR=$home XDG_CONFIG_HOME=$home/.config TERM=xterm LANG=C.UTF-8 PATH=$PATH $cmd" ||
    { echo "FAIL $sh: tmux could not start it"; failed=$((failed + 1)); continue; }
  expect $sh "starts" '$'
  type_tab 'wizq ru'
  expect $sh "wizq ru<Tab>" '$ wizq run'
  type_tab 'wizq run --ha'
  expect $sh "wizq run --ha<Tab>" '$ wizq run --halt'
  type_tab "wizq run $workflow --from " twice
  expect $sh "--from <Tab> lists the steps" ReadManifest ConfirmInstall \
    StartInstall Download Verify Unpack Configure
  type_tab 'wizq answer ' twice
  expect $sh "wizq answer <Tab> lists the waiting tasks" '2=' '3='
  tmux -L "$socket" kill-session -t t
done
echo "completion_shells ($mode): $failed failed"
[ $failed -eq 0 ]
