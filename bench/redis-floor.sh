#!/usr/bin/env bash
# The floor under Redis' CPU per event: what redis-server spends on only the bare commands one
# call event needs, with no Lua, sent by a pipelined client (redis-py, 100 events a pipeline):
# the producer's XADD to the calls stream, its share of one XREADGROUP COUNT 100, its share of
# one XACK of the 100 entries read (pushgw acknowledges a turn's entries in one XACK), one SET
# of its ~340 B result JSON with PX, and one XADD of it to the results stream (MAXLEN ~). The
# same method as bench/redis-scripts.sh: redis-server's process CPU over EVENTS events (its
# commands, parsing, networking) and INFO commandstats. Beside it h2load's CPU per request
# against nghttpd (as bench/run.sh runs it: EVENTS requests, 2 connections x 100 streams), and
# the floor over it: how close the cost issue's target (Redis CPU per event <= 2x h2load's
# CPU per request) can come whatever the scripts do.
# Alone: PUSHGW_BIN=… bench/redis-floor.sh (pushgw-bench signs h2load's JWT).
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=pushgw-redis-floor
source bench/common.sh
bin=${PUSHGW_BIN:-$(swift build -c release --show-bin-path)}
bench_bin=${PUSHGW_BENCH_BIN:-$bin}  # pushgw-bench: the scripts' names and h2load's JWT
EVENTS=${BENCH_FLOOR_EVENTS:-20000}
ROUNDS=${BENCH_ROUNDS:-3}

start_nghttpd_and_redis
redis_pid=$(redis_server_pid "$rport")
echo "== Redis CPU per event, the floor: bare commands, no Lua, pipelined ($EVENTS events, $ROUNDS rounds)"
floors=()
for _ in $(seq 1 "$ROUNDS"); do
  redis-cli -p "$rport" FLUSHALL >/dev/null
  redis-cli -p "$rport" CONFIG RESETSTAT >/dev/null
  out=$(PYTHONPATH=bench python3 - "$rport" "$EVENTS" "$redis_pid" <<'PY'
import json, sys, redis
from proc_cpu import cpu_seconds
port, n, pid = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
cpu = lambda: cpu_seconds(pid)
r = redis.Redis(port=port)
calls, results = "pushgw:{app0}:calls", "pushgw:{app0}:results"
r.xgroup_create(calls, "routers", id="0", mkstream=True)
event = {"v": 1, "type": "incoming_call", "voip_token": "ab" * 32,
         "voip": {"caller": "+15551234567", "callerName": "Alice Johnson", "sessionId": "abc-123-def", "hasVideo": False}}
pad = "x" * 120
cpu0 = cpu()
for start in range(0, n, 100):
    ids = range(start, min(n, start + 100))
    p = r.pipeline(transaction=False)
    for i in ids:
        p.xadd(calls, {"event": json.dumps(dict(event, id=f"t-{i}"), separators=(",", ":"))})
    p.execute()
    entries = r.xreadgroup("routers", "floor", {calls: ">"}, count=100)[0][1]
    p = r.pipeline(transaction=False)
    for (entry, _), i in zip(entries, ids):
        result = json.dumps({"outcome": "delivered_voip", "id": f"t-{i}", "entry": entry.decode(), "type": "incoming_call",
                             "app": "app0", "attempts": [{"channel": "voip", "status": 200, "apns_id": "6f1c2a0e-4b7d-4c1e-9a55-3e2f1d0c9b8a"}],
                             "devices": 1, "recorded_ms": 1764780000000, "pad": pad}, separators=(",", ":"))
        p.set(f"pushgw:{{app0}}:result:t-{i}", result, px=900_000)
        p.xadd(results, {"result": result}, maxlen=20000, approximate=True)
    p.xack(calls, "routers", *[entry for entry, _ in entries])
    p.execute()
cpu1 = cpu()
size = len(r.get("pushgw:{app0}:result:t-0"))
stats = {}
for name, f in r.info("commandstats").items():
    if name.startswith("cmdstat_") and name[8:] in ("xadd", "xreadgroup", "xack", "set"):
        stats[name[8:]] = (f["calls"], f["usec"])
print(json.dumps({"cpu_us": (cpu1 - cpu0) * 1e6 / n, "result_bytes": size, "stats": stats}))
PY
)
  echo "$out" > "$work/floor.json"
  floors+=("$(python3 -c 'import json,sys; print("%.2f" % json.load(open(sys.argv[1]))["cpu_us"])' "$work/floor.json")")
done
python3 - "$work/floor.json" "$EVENTS" <<'PY'
import json, sys
d, n = json.load(open(sys.argv[1])), int(sys.argv[2])
print(f"{'INFO commandstats (last round)':30s} {'calls/event':>12s} {'µs/event':>10s}   (a result JSON of {d['result_bytes']} B)")
for name, (calls, us) in sorted(d["stats"].items(), key=lambda kv: -kv[1][1]):
    print(f"{name:30s} {calls / n:12.3f} {us / n:10.2f}")
PY
floor=$(printf '%s\n' "${floors[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')

token=${tokens%%,*}
python3 -c "print('{\"caller\":\"+15551234567\",\"callerName\":\"Alice Johnson\",\"pad\":\"'+'x'*250+'\"}', end='')" > "$work/body.json"
jwt=$("$bench_bin/pushgw-bench" jwt --key "$pki/AuthKey.p8")
h2s=()
for _ in $(seq 1 "$ROUNDS"); do
  h2s+=("$(h2load_cpu_us "$EVENTS" "$work/body.json" "$jwt" "$port" "$token")")
done
h2=$(printf '%s\n' "${h2s[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
printf '%-30s %12s %10s   (each round: %s)\n' "redis-server CPU per event" "" "$floor" "${floors[*]}"
printf '%-30s %12s %10s   (each round: %s)\n' "h2load CPU per request" "" "$h2" "${h2s[*]}"
python3 - "$floor" "$h2" <<'PY'
import sys
f, h = map(float, sys.argv[1:])
print(f"{'the floor / h2load':30s} {'':12s} {f / h:9.2f}x   (the target, <= 2.0x, is {2 * h:.1f} µs an event: "
      + (f"{2 * h - f:.1f} µs above the floor for the scripts' work)" if 2 * h >= f else f"{f - 2 * h:.1f} µs below the floor, out of reach)"))
PY
