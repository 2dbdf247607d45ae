#!/usr/bin/env bash
# Runs the XCTest suites (built already by `make test`) and ends with one plain summary line
# ("N passed, N failed, N skipped"), so a reader of the log's last line sees the count.
set -uo pipefail
log=$(mktemp)
swift test --skip-build --disable-swift-testing "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
summary=$(grep -E "^[[:space:]]*Executed [0-9]+ tests?, with" "$log" | tail -1)
rm -f "$log"
total=$(echo "$summary" | sed -nE 's/.*Executed ([0-9]+) tests?.*/\1/p')
failed=$(echo "$summary" | sed -nE 's/.* ([0-9]+) failures? .*/\1/p')
skipped=$(echo "$summary" | sed -nE 's/.* with ([0-9]+) tests? skipped.*/\1/p')
total=${total:-0}; failed=${failed:-0}; skipped=${skipped:-0}
if [ "$total" -eq 0 ]; then echo "no test ran"; exit 1; fi
echo "$((total - failed - skipped)) passed, $failed failed, $skipped skipped"
exit "$status"
