#!/usr/bin/env bash
# make bench's ring-receipt phase (also runnable alone): the true end-to-end figure of a call.
# `pushgw run --role router` routes single-device calls of one app with ring receipts on
# (ring_receipt_timeout_ms 4000) to the APNs simulator, which plays the phones and their app's
# backend (docs/simulator.md, ring_receipts): for each VoIP push it accepts it adds the call's
# call_ringing to the app's calls stream. A producer writes RING_RATE events/s (default 2,000)
# for RING_SECONDS (default 5). From the results: XADD → APNs accepted the VoIP push (the call's
# latency_ms) and XADD → ringing (its device's rang_at, the receipt entry's time, minus the
# call's entry time), p50/p99 of the same calls in the same run, and how many were escalated
# for want of a receipt (an attempt with kind no_receipt; expected 0). The simulated phone rings
# the moment the simulator accepts the push (no device in between), so XADD→ringing is the
# gateway's and Redis' part of the real figure: XADD→accepted plus the receipt's trip through
# the stream (the gateway may handle the 200 after the receipt's XADD, so it can read lower).
#
#   PUSHGW_BIN   directory of the pushgw binary (default: the release build's)
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${RING_RATE:-2000}
SECONDS_RUN=${RING_SECONDS:-5}
bin=${PUSHGW_BIN:-$(swift build -c release --show-bin-path)}
scratch=pushgw-bench-rings
. bench/common.sh

scripts/make-pki.sh "$work/pki" com.example.app >/dev/null
pki=$work/pki
rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --daemonize no --logfile "$work/redis.log" &
pids+=($!)
wait_port "$rport"

start_simulator "$bin/pushgw" '"raised_max_streams": 1000,
  "ring_receipts": { "redis_url": "redis://127.0.0.1:'"$rport"'/0", "streams": { "com.example.app": "pushgw:{app0}:calls" } },'

aport=$(free_port)
cat > "$work/gateway.json" <<JSON
{ "redis": { "url": "redis://127.0.0.1:$rport/0" }, "admin": { "listen": "127.0.0.1:$aport" },
  "apns": { "production": { "endpoint": "127.0.0.1:$sport" }, "sandbox": { "endpoint": "127.0.0.1:$sport" },
            "ca_file": "$pki/ca.pem", "connections": 2, "max_queued": 20000 },
  "credentials": { "k": { "team_id": "TEAM123456", "key_id": "KEY1234567", "key_file": "$pki/AuthKey.p8" } },
  "apps": { "app0": { "bundle_id": "com.example.app", "credential": "k", "environment": "production",
                      "ring_timeout_s": 30, "ring_receipt_timeout_ms": 4000 } } }
JSON
"$bin/pushgw" run --config "$work/gateway.json" --role router --consumer bench-rings --log-level warn > "$work/gateway.log" 2>&1 &
pids+=($!)

echo "== Ring receipts: $RATE calls/s for $SECONDS_RUN s, one app, single-device calls, pushgw run to the APNs simulator playing the phones (each accepted VoIP push rings and its receipt is added)"
python3 - "$rport" "$RATE" "$SECONDS_RUN" <<'PY'
import json, sys, time, redis
port, rate, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
r = redis.Redis(port=port)
calls, results = "pushgw:{app0}:calls", "pushgw:{app0}:results"
# The router is up once its consumer group exists.
deadline = time.time() + 20
while time.time() < deadline:
    try:
        if r.xinfo_groups(calls): break
    except redis.ResponseError:
        pass
    time.sleep(0.05)
token = "ab" * 32
voip = {"caller": "+15551234567", "callerName": "Alice Johnson", "sessionId": "abc-123-def", "hasVideo": False}
total = int(rate * seconds)
batch = max(1, rate // 100)  # one pipeline every 10 ms
start = time.time()
sent = 0
while sent < total:
    p = r.pipeline(transaction=False)
    for _ in range(min(batch, total - sent)):
        ev = {"v": 1, "id": f"r-{sent}", "type": "incoming_call", "voip_token": token, "voip": voip}
        p.xadd(calls, {"event": json.dumps(ev, separators=(",", ":"))})
        sent += 1
    p.execute()
    pause = start + sent / rate - time.time()
    if pause > 0: time.sleep(pause)
offered = sent / (time.time() - start)
# Each call has two results: its receipt's own and its own.
deadline = time.time() + 60
while r.xlen(results) < 2 * total and time.time() < deadline:
    time.sleep(0.1)
accept, ring, escalated, other = [], [], 0, 0
for _, fields in r.xrange(results):
    res = json.loads(fields[b"result"])
    if res.get("type") != "incoming_call": continue
    entry = int(res["entry"].split("-")[0])
    if res.get("latency_ms") is not None: accept.append(res["latency_ms"])
    devices = res.get("devices") or [{}]
    if devices[0].get("rang_at") is not None: ring.append(devices[0]["rang_at"] - entry)
    if any(a.get("kind") == "no_receipt" for a in res.get("attempts", [])): escalated += 1
    if res["outcome"] != "delivered_voip": other += 1
def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, -(-len(xs) * p // 100) - 1))] if xs else None
print(f"offered {offered:.0f} calls/s, {total} calls; recorded {len(accept)}, rang {len(ring)}, escalated (no_receipt) {escalated}, not delivered_voip {other}")
print(f"{'':28s} {'p50':>8s} {'p99':>8s}")
print(f"{'XADD -> APNs accepted (ms)':28s} {q(accept, 50)!s:>8s} {q(accept, 99)!s:>8s}")
print(f"{'XADD -> ringing (ms)':28s} {q(ring, 50)!s:>8s} {q(ring, 99)!s:>8s}")
if len(ring) < total: print(f"(missing: {total - len(ring)} calls without a ring time after 60 s)")
PY
