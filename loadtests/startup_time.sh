#!/usr/bin/env bash
# Start-up time of `make run`: seconds from `make run` until `switchboard status` reports every
# service healthy, then a Ctrl-C (SIGINT) to the process group and the exit status.
# Usage: loadtests/startup_time.sh [REPO_DIR]   (run it twice: the first run is the cold start
# when REPO_DIR has no .venv and no .switchboard yet; the second is a warm start)
set -u
cd "${1:-.}"
log=$(mktemp)
start=$(date +%s.%N)
setsid make run > "$log" 2>&1 &
pid=$!
until [ -x .venv/bin/switchboard ] && .venv/bin/switchboard status > /dev/null 2>&1; do
  sleep 0.2
  if ! kill -0 "$pid" 2> /dev/null; then echo "make run exited early; log: $log"; tail -20 "$log"; exit 1; fi
done
end=$(date +%s.%N)
printf 'healthy after %.1f s\n' "$(echo "$end - $start" | bc)"
kill -INT -- -"$pid"
wait "$pid"
echo "make run exit status after Ctrl-C: $?"
grep -m1 "up in" "$log"
