# Helpers for the scripts that drive fencelab in a tmux pane of their own.
# Set $sock (the tmux server) and $pane (the session) before sourcing this.

t() { tmux -L "$sock" "$@"; }

# Wait (up to 30 s) until the pane shows $1.
wait_for() {
  for _ in $(seq 300); do
    t capture-pane -p -t "$pane" | grep -q -- "$1" && return 0
    sleep 0.1
  done
  echo "timed out waiting for: $1" >&2; t capture-pane -p -t "$pane" >&2; exit 1
}
