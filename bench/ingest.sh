#!/usr/bin/env bash
# make bench's HTTP API phase (also runnable alone): producers without Redis (docs/protocol.md,
# "The HTTP API"). `pushgw run` (router and the ingest listener, plain HTTP on loopback, one
# app) routes to nghttpd. In the same run, alternating, ROUNDS times: INGEST_EVENTS call events
# (default 20,000) XADDed by a Redis producer, pipelined, before the gateway starts (the Redis
# path), and the same count POSTed to `POST /v1/apps/app0/calls` by `pushgw-bench ingest`
# (64 in flight, libcurl keeping its connections) while the gateway runs (the HTTP path).
# Prints per path the events/s from the first to the last result (Redis' entry ids), their
# ratio, and the HTTP path's accept rate and 202 latency p50/p99/max (request sent to answer).
#
#   PUSHGW_BIN   directory of the pushgw and pushgw-bench binaries (default: the release build's)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${INGEST_EVENTS:-20000}
ROUNDS=${BENCH_ROUNDS:-3}
CONCURRENCY=${INGEST_CONCURRENCY:-64}
bin=${PUSHGW_BIN:-$(swift build -c release --show-bin-path)}
scratch=pushgw-bench-ingest
. bench/common.sh

start_nghttpd_and_redis
token=${tokens%%,*}
iport=$(free_port)
key="pgw_$(python3 -c 'import secrets; print(secrets.token_hex(32))')"
write_router_config "$work/gw.json" "$rport" "$port" "$pki" "$(free_port)"
python3 - "$work/gw.json" "$iport" "$key" <<'PY'
import hashlib, json, sys
path, iport, key = sys.argv[1:]
c = json.load(open(path))
c["ingest"] = {"listen": f"127.0.0.1:{iport}",
               "apps": {"app0": {"api_keys": [hashlib.sha256(key.encode()).hexdigest()],
                                 "requests_per_second": 1000000, "burst": 1000000}}}
json.dump(c, open(path, "w"))
PY

# Results of app0 so far, and the events/s of a finished drain of N (as common.sh's, one app).
app0_results() { redis-cli -p "$rport" XLEN 'pushgw:{app0}:results'; }
app0_rate() {
  python3 - "$rport" "$N" <<'PY'
import sys, redis
r = redis.Redis(port=int(sys.argv[1])); n = int(sys.argv[2]); k = "pushgw:{app0}:results"
assert r.xlen(k) == n, "every event has its result"
ms = lambda entry_id: int(entry_id.split(b"-")[0])
print(int((n - 1) * 1000 / max(1, ms(r.xrevrange(k, count=1)[0][0]) - ms(r.xrange(k, count=1)[0][0]))))
PY
}
start_gateway() {
  "$bin/pushgw" run --config "$work/gw.json" --consumer bench-ingest >/dev/null 2>&1 &
  gw=$!
  pids+=("$gw")
  wait_port "$iport"
}
stop_gateway() {
  for _ in $(seq 1 1200); do [ "$(app0_results)" -ge "$N" ] && break; sleep 0.1; done
  kill -TERM "$gw"; wait "$gw" || true
  forget_pid "$gw"
}

echo "== HTTP API: $N call events to one app, XADDed by a Redis producer or POSTed to pushgw run's ingest listener ($CONCURRENCY in flight), routed to nghttpd, ${ROUNDS} alternating rounds"
redis_rps=(); http_rps=(); accept_rps=(); p50=(); p99=(); pmax=()
for i in $(seq 1 "$ROUNDS"); do
  if [ $((i % 2)) -eq 1 ]; then order=(redis http); else order=(http redis); fi
  for path in "${order[@]}"; do
    redis-cli -p "$rport" FLUSHALL >/dev/null
    if [ "$path" = redis ]; then
      python3 - "$rport" "$N" "$token" <<'PY'
import json, sys, redis
port, n, token = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
r = redis.Redis(port=port); p = r.pipeline(transaction=False)
for i in range(n):
    ev = {"v": 1, "id": f"r-{i}", "type": "incoming_call", "voip_token": token,
          "voip": {"caller": "+15551234567", "callerName": "Alice Johnson", "sessionId": "abc-123-def", "hasVideo": False}}
    p.xadd("pushgw:{app0}:calls", {"event": json.dumps(ev, separators=(",", ":"))})
    if i % 5000 == 4999: p.execute()
p.execute()
PY
      start_gateway
      stop_gateway
      redis_rps+=("$(app0_rate)")
    else
      start_gateway
      out=$("$bin/pushgw-bench" ingest --url "http://127.0.0.1:$iport" --app app0 --key "$key" --token "$token" \
              --requests "$N" --concurrency "$CONCURRENCY" --prefix "h$i")
      stop_gateway
      http_rps+=("$(app0_rate)")
      read -r a b c d < <(echo "$out" | python3 -c 'import json,sys; o=json.load(sys.stdin); assert o["accepted"] == o["requests"], o; print(o["rate"], o["p50_ms"], o["p99_ms"], o["max_ms"])')
      accept_rps+=("$a"); p50+=("$b"); p99+=("$c"); pmax+=("$d")
    fi
  done
done
rm_=$(printf '%s\n' "${redis_rps[@]}" | median); hm_=$(printf '%s\n' "${http_rps[@]}" | median)
printf '%-40s %12s\n' "events/s, Redis producer (XADD)" "$rm_"
printf '%-40s %12s   (HTTP / Redis %s)\n' "events/s, HTTP API (POST, 202)" "$hm_" "$(python3 -c "print(f'{$hm_/$rm_:.2f}')")"
printf '%-40s %12s\n' "  the API's answers/s" "$(printf '%s\n' "${accept_rps[@]}" | median)"
printf '%-40s %12s ms\n' "  accept latency p50 (sent to 202)" "$(printf '%s\n' "${p50[@]}" | median)"
printf '%-40s %12s ms\n' "  accept latency p99" "$(printf '%s\n' "${p99[@]}" | median)"
printf '%-40s %12s ms (any round)\n' "  accept latency max" "$(printf '%s\n' "${pmax[@]}" | sort -n | tail -1)"
