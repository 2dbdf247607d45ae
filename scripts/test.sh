#!/usr/bin/env bash
# Runs the XCTest suites (built already by `make test`) and ends with one plain summary line
# ("N passed, N failed, N skipped"), so a reader of the log's last line sees the count.
#
# A hang fails the run instead of holding it: past PUSHGW_TEST_LIMIT_S seconds in all (default
# 1500), or PUSHGW_TEST_CASE_LIMIT_S seconds in one test case (default 300), the run is killed,
# the test that was running is named, and the exit status is 124. What the tests started dies
# with them (Tests/TestSupport: TestScratch, ChildProcess). A test process that dies (a crash) is
# reported with its signal, the test running and its last lines, never as "no test ran".
set -uo pipefail
limit=${PUSHGW_TEST_LIMIT_S:-1500}
case_limit=${PUSHGW_TEST_CASE_LIMIT_S:-300}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# A session of its own, so that the whole run (swift test and the test bundle) can be killed;
# line-buffered, so the log shows the test that runs now.
setsid stdbuf -oL -eL swift test --skip-build --disable-swift-testing "$@" > "$log" 2>&1 &
run=$!
tail -n +1 -f --pid="$run" "$log" &
printer=$!

started=$SECONDS
case_line=""
case_started=$SECONDS
stopped=""
while kill -0 "$run" 2>/dev/null; do
  line=$(grep -E "^Test Case '.*' started" "$log" | tail -1)
  if [ "$line" != "$case_line" ]; then case_line=$line; case_started=$SECONDS; fi
  current=$(sed -nE "s/^Test Case '(.*)' started.*/\1/p" <<<"$case_line")
  finished=$(grep -cF -e "Test Case '$current' passed" -e "Test Case '$current' failed" -e "Test Case '$current' skipped" "$log")
  if [ $((SECONDS - started)) -ge "$limit" ]; then
    stopped="the run took over ${limit} s (PUSHGW_TEST_LIMIT_S)"
  elif [ -n "$current" ] && [ "$finished" -eq 0 ] && [ $((SECONDS - case_started)) -ge "$case_limit" ]; then
    stopped="one test case took over ${case_limit} s (PUSHGW_TEST_CASE_LIMIT_S)"
  fi
  if [ -n "$stopped" ]; then
    # Every process of the run's session: swift test starts the test bundle in a process
    # group of its own.
    pkill -KILL -s "$run" 2>/dev/null
    wait "$run" 2>/dev/null
    wait "$printer" 2>/dev/null
    echo
    echo "make test stopped: $stopped."
    echo "The test running was: ${current:-none had started}"
    echo "  ($case_line)"
    exit 124
  fi
  sleep 1
done
wait "$run"
status=$?
wait "$printer" 2>/dev/null

summary=$(grep -E "^[[:space:]]*Executed [0-9]+ tests?, with" "$log" | tail -1)
total=$(echo "$summary" | sed -nE 's/.*Executed ([0-9]+) tests?.*/\1/p')
failed=$(echo "$summary" | sed -nE 's/.* ([0-9]+) failures? .*/\1/p')
skipped=$(echo "$summary" | sed -nE 's/.* with ([0-9]+) tests? skipped.*/\1/p')
total=${total:-0}; failed=${failed:-0}; skipped=${skipped:-0}
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
  # The test process died (a crash ends it without a final count, and one before the first
  # suite ended without any count): what ran before it is not a result. Said with how it
  # ended, the test that was running, and the last lines it wrote before the crash report.
  current=$(sed -nE "s/^Test Case '(.*)' started.*/\1/p" "$log" | tail -1)
  # swift test names the bundle's signal ("exited with unexpected signal code 4").
  signal=$(sed -nE 's/.*exited with unexpected signal code ([0-9]+).*/\1/p' "$log" | tail -1)
  if [ -z "$signal" ] && [ "$status" -gt 128 ]; then signal=$((status - 128)); fi
  how="exit status $status"
  if [ -n "$signal" ]; then how="signal $signal (SIG$(kill -l "$signal" 2>/dev/null || echo '?')), $how"; fi
  echo
  echo "the test process died before the end: $how"
  echo "The test running was: ${current:-none had started}"
  grep -E "Fatal error|Program crashed|Precondition failed|Assertion failed" "$log" | head -3 | sed 's/^/  /'
  # The lines before the runtime's backtrace (which starts "*** Signal" or "*** Program crashed").
  report=$(grep -nE '^\*\*\* (Signal|Program crashed)' "$log" | head -1 | cut -d: -f1)
  echo "Its last lines:"
  if [ -n "$report" ]; then head -n $((report - 1)) "$log" | tail -n 15; else tail -n 15 "$log"; fi | sed 's/^/  /'
  exit "$status"
fi
if [ "$total" -eq 0 ]; then echo "no test ran"; exit 1; fi
echo "$((total - failed - skipped)) passed, $failed failed, $skipped skipped"
exit "$status"
