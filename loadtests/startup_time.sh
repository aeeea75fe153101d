#!/usr/bin/env bash
# Start-up time of `make run`: seconds from `make run` until the supervisor prints "up in" (it does
# once its own poll finds every service healthy), confirmed by one `switchboard status` (exit 0: all
# healthy), then a Ctrl-C (SIGINT) to the process group and the exit status.
# Usage: loadtests/startup_time.sh [REPO_DIR]   (run it twice: the first run is the cold start
# when REPO_DIR has no .venv and no .switchboard yet; the second is a warm start)
# The wait is a grep of the log every 0.2 s, not `switchboard status` in a loop: each status run
# imports the CLI (~2.5 s of CPU), which took a core from the services starting on a 2-core machine.
set -u
cd "${1:-.}"
log=$(mktemp)
start=$(date +%s.%N)
setsid make run > "$log" 2>&1 &
pid=$!
until grep -q " up in " "$log"; do
  sleep 0.2
  if ! kill -0 "$pid" 2> /dev/null; then echo "make run exited early; log: $log"; tail -20 "$log"; exit 1; fi
done
end=$(date +%s.%N)
if .venv/bin/switchboard status > /dev/null 2>&1; then
  printf 'healthy after %.1f s\n' "$(echo "$end - $start" | bc)"
else
  echo "NOT healthy when run printed 'up in' (after $(echo "$end - $start" | bc) s); log: $log"
fi
grep '"service healthy"' "$log" | sed -E 's/.*"service": "([a-z_]+)".*"seconds": ([0-9.]+).*/  \1 healthy \2 s after its spawn/'
kill -INT -- -"$pid"
wait "$pid"
echo "make run exit status after Ctrl-C: $?"
grep -m1 "up in" "$log"
