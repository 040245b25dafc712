# Stopping what a script started, for scripts/demo.sh and the proxy tests: source it.
# stop_all PID...: newest first (the last argument first), each gone before the next
# (SIGTERM, 10 s, SIGTERM again, 5 s, then SIGKILL), so that a job stops before the daemons it is attached to.
stop_all() {
  local pids=("$@") i p
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    p=${pids[i]}
    kill -TERM "$p" 2>/dev/null || continue
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    # A router's lnetd drains its routes on the first signal and stops on the second.
    kill -TERM "$p" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  return 0
}
