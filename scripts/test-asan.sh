#!/usr/bin/env bash
# Runs the tests that read hostile input under AddressSanitizer, so an out-of-bounds write
# fails `make test` instead of shipping: event decoding and the router (RoutingTests), the
# request-header layout (RequestHeaderBlockTests), stream replies (StreamRepliesTests),
# hostile entries through the in-process router (HostileEventTests) and the hostile-event
# corpus against a live `pushgw run` built with ASan (HostileCorpusTests: the test finds the
# instrumented binary beside its test bundle; it also sends the console and the CLI of that
# binary the hostile numbers of Tests/Corpus/hostile_numbers.py), the numbers a person types
# in-process (ConsolePreviewTests, DeadCommandTests), the admin server dropping an answer
# whose client left (AdminLateAnswerTests: evhttp frees such a request), closing connections
# that give way to newer ones (AdminLimitsTests) and walking evhttp's header list to refuse
# what it cannot trust (RequestScreenTests), and the producers' HTTP API on the same server
# with TLS, hostile bodies and floods (IngestAPITests, IngestRulesTests).
#
# The instrumented build has a scratch path of its own (.build/asan), so the normal debug
# build stays cached; only the gateway and the test bundle are built (not the benchmarks).
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=.build/asan
tests="RoutingTests|RequestHeaderBlockTests|StreamRepliesTests|HostileEventTests|HostileCorpusTests|ConsolePreviewTests|DeadCommandTests|AdminLateAnswerTests|AdminLimitsTests|RequestScreenTests|IngestAPITests|IngestRulesTests"
start=$(date +%s)
swift build --sanitize=address --scratch-path "$scratch" --product pushgw
swift build --sanitize=address --scratch-path "$scratch" --product pushgwPackageTests
built=$(date +%s)
# Leak checking is off: the Swift runtime keeps global allocations to the end, and what is
# looked for here is memory errors. An error report ends the process (halt_on_error).
export ASAN_OPTIONS="detect_leaks=0:halt_on_error=1"
echo "under AddressSanitizer: $tests"
scripts/test.sh --scratch-path "$scratch" --filter "$tests"
echo "AddressSanitizer: build $((built - start)) s, tests $(($(date +%s) - built)) s"
