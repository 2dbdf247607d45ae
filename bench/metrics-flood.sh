#!/usr/bin/env bash
# The cost of a /metrics flood to routing, measured in one run: pushgw-bench e2e routes a
# steady 2,000 events/s for 5 s (XADD to recorded outcome), then the same while 4 threads
# fetch /metrics from the admin endpoint back to back, one connection per request. Prints,
# per round and as medians, the p99 without and with the flood, their ratio and the scrapes
# the endpoint answered. The same phases as `make bench` runs (bench/run.sh), alone, so that
# a change to the admin endpoint can be measured before and after in minutes.
#
#   bench/metrics-flood.sh            3 rounds (BENCH_ROUNDS)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${BENCH_ROUNDS:-3}
EVENTS=2000
swift build -c release --product pushgw-bench >/dev/null
bin=$(swift build -c release --show-bin-path)
scratch=pushgw-metrics-flood
. bench/common.sh

start_nghttpd_and_redis

p99=(); flood=(); scrapes=()
for round in $(seq 1 "$ROUNDS"); do
  redis-cli -p "$rport" FLUSHALL >/dev/null
  python3 - "$rport" "$EVENTS" "$tokens" <<'PY'
import json, sys, redis
port, n, tokens = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split(",")
p = redis.Redis(port=port).pipeline(transaction=False)
for i in range(n):
    ev = {"v": 1, "id": f"t-{i}", "type": "incoming_call", "voip_token": tokens[i % len(tokens)]}
    p.xadd(f"pushgw:{{app{i % 4}}}:calls", {"event": json.dumps(ev, separators=(",", ":"))})
p.execute()
PY
  out=$("$bin/pushgw-bench" e2e --redis "redis://127.0.0.1:$rport/0" --port "$port" --ca "$pki/ca.pem" --key "$pki/AuthKey.p8" \
        --tokens "$tokens" --apps 4 --events "$EVENTS" --rate 2000 --seconds 5 --connections 2 --scrapers 4)
  read -r a b c <<<"$(echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["p99_ms"], d["flood_p99_ms"], d["flood_scrapes"])')"
  p99+=("$a"); flood+=("$b"); scrapes+=("$c")
  echo "round $round: p99 $a ms, under the flood $b ms ($(python3 -c "print(f'{$b/$a:.2f}')")x), $c scrapes answered in 5 s"
done
m=$(printf '%s\n' "${p99[@]}" | median); f=$(printf '%s\n' "${flood[@]}" | median); s=$(printf '%s\n' "${scrapes[@]}" | median)
echo "median: p99 $m ms, under the flood $f ms ($(python3 -c "print(f'{$f/$m:.2f}')")x), $s scrapes answered"
