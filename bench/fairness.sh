#!/usr/bin/env bash
# make bench's fairness phase (also runnable alone): one tenant cannot slow another
# (docs/architecture.md, "Scheduling"). `pushgw run --role router` routes two apps on one
# credential (so one APNs pool) to the APNs simulator answering at once. App B writes
# FAIR_B_RATE calls/s (default 20), first alone for FAIR_B_SECONDS (default 10), then while app A
# drains a backlog of FAIR_BACKLOG events (default 50,000) written in one second; A's backlog is
# also drained alone. From the results, in the same run: B's XADD → result (the result's
# entry id time minus the call's, both Redis' clock, ms) p50/p99/max alone and during A's
# backlog, with the ratio of the p99s (targets: ≤ 2 and under 20 ms), and A's drain rate
# (events/s from its first to its last result's entry id) alone and during B's calls, with
# their ratio (target: within 10 %). A drain lasts about a second, so B sends ~20 calls in one:
# FAIR_DRAINS backlogs (default 5), each drained alone then during B's calls, pool B's calls
# so the p99 during rests on ~100 of them, and A's rates are the drains' medians. B's time is
# also split by stage from its results (p50/p99): XADD to the push handed to the APNs client
# (the attempt's `t`: read, lookup, the call's start), to its answer (`latency_ms`: the client's
# queue, the wire, the simulator), and to the record (the result's entry id); A's last two per
# drain. And the CPU each process used during those drains (/proc, % of one core of the
# machine's): the producers (this script), the gateway, redis-server and the simulator, which
# says whether one of them was saturated.
#
# Then the isolation floor, the reference those figures are held against: the same phases with
# A and B each routed by its own `pushgw run` (one app each, the same Redis, simulator and
# cores), so no scheduling of pushgw's is shared and what B still loses during A's drain is
# the machine's (CPU, Redis, the simulator). B's p99 during A's drain in the shared gateway over
# that floor's says what pushgw's sharing itself costs.
#   FAIR_FLOOR   0 skips the floor (default 1)
#
#   PUSHGW_BIN   directory of the pushgw binary (default: the release build's)
#   FAIR_A_MAX_IN_FLIGHT   app A's limits.max_in_flight (default: none, the router's per-app cap)
set -euo pipefail
cd "$(dirname "$0")/.."
B_RATE=${FAIR_B_RATE:-20}
B_SECONDS=${FAIR_B_SECONDS:-10}
BACKLOG=${FAIR_BACKLOG:-50000}
DRAINS=${FAIR_DRAINS:-5}
A_LIMITS=""
[ -n "${FAIR_A_MAX_IN_FLIGHT:-}" ] && A_LIMITS=", \"limits\": { \"max_in_flight\": $FAIR_A_MAX_IN_FLIGHT }"
bin=${PUSHGW_BIN:-$(swift build -c release --show-bin-path)}
scratch=pushgw-bench-fair
. bench/common.sh

scripts/make-pki.sh "$work/pki" com.example.app >/dev/null
pki=$work/pki
rport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --daemonize no --logfile "$work/redis.log" &
pids+=($!)
wait_port "$rport"

start_simulator "$bin/pushgw" '"raised_max_streams": 1000,'
simulator=${pids[-1]}

app_a='"appA": { "bundle_id": "com.example.app", "credential": "k", "environment": "production", "ring_timeout_s": 600'"$A_LIMITS"' }'
app_b='"appB": { "bundle_id": "com.example.app", "credential": "k", "environment": "production", "ring_timeout_s": 600 }'
# A gateway named NAME routing APPS (the apps' config entries, comma-separated); its pid in `gateway`.
start_gateway() {
  local name=$1 apps=$2 port
  port=$(free_port)
  cat > "$work/$name.json" <<JSON
{ "redis": { "url": "redis://127.0.0.1:$rport/0" }, "admin": { "listen": "127.0.0.1:$port" },
  "apns": { "production": { "endpoint": "127.0.0.1:$sport" }, "sandbox": { "endpoint": "127.0.0.1:$sport" },
            "ca_file": "$pki/ca.pem", "connections": 2, "max_queued": 20000 },
  "credentials": { "k": { "team_id": "TEAM123456", "key_id": "KEY1234567", "key_file": "$pki/AuthKey.p8" } },
  "apps": { $apps } }
JSON
  "$bin/pushgw" run --config "$work/$name.json" --role router --consumer "bench-$name" --log-level warn > "$work/$name.log" 2>&1 &
  gateway=$!
  pids+=($gateway)
}
stop_gateway() { kill -TERM "$1"; wait "$1" 2>/dev/null || true; forget_pid "$1"; }

cat > "$work/fairness.py" <<'PY'
import json, os, sys, time, redis
from proc_cpu import cpu_seconds as process_cpu_seconds
port, b_rate, b_seconds, backlog, mode, drains = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[7])
processes = [arg.split("=") for arg in sys.argv[8:]]  # name=pid: whose CPU is measured during the drains
def cpu_seconds():
    """Each process's CPU time (user + system, s), by name (several pids of a name add up); this
    script's own (the producers) as `producers`."""
    out = {"producers": sum(os.times()[:2])}
    for name, pid in processes:
        out[name] = out.get(name, 0) + process_cpu_seconds(pid)
    return out
r = redis.Redis(port=port)
calls = {app: f"pushgw:{{{app}}}:calls" for app in ("appA", "appB")}
results = {app: f"pushgw:{{{app}}}:results" for app in ("appA", "appB")}
deadline = time.time() + 20
readers = {"appA": "bench-shared", "appB": "bench-shared"} if mode == "shared" else {"appA": "bench-only-a", "appB": "bench-only-b"}
while time.time() < deadline:  # the routers are up once they read each app's stream
    try:
        if all(any(c["name"].decode() == readers[app] for c in r.xinfo_consumers(k, "pushgw")) for app, k in calls.items()): break
    except redis.ResponseError:
        pass
    time.sleep(0.05)
voip = {"caller": "+15551234567", "callerName": "Alice Johnson", "sessionId": "abc-123-def", "hasVideo": False}
ms = lambda entry_id: int(entry_id.split(b"-")[0] if isinstance(entry_id, bytes) else entry_id.split("-")[0])
def event(i, prefix, token):
    return {"event": json.dumps({"v": 1, "id": f"{prefix}-{i}", "type": "incoming_call", "voip_token": token, "voip": voip},
                                separators=(",", ":"))}
def last_id(key):
    got = r.xrevrange(key, count=1)
    return got[0][0] if got else b"0-0"
def results_after(key, start):
    out, cursor = [], b"(" + start
    while True:
        page = r.xrange(key, min=cursor, max="+", count=10000)
        if not page: return out
        out += page
        cursor = b"(" + page[-1][0]

b_sent = 0
def b_call():
    """One call of B; its calls entry id (Redis' clock)."""
    global b_sent
    b_sent += 1
    return r.xadd(calls["appB"], event(b_sent, f"b-{mode}", "bb" * 32))

def b_latencies(entries, start):
    """B's XADD -> result for `entries` (calls entry ids), ms, from B's results after `start`."""
    want = {e.decode() for e in entries}
    got = {}
    deadline = time.time() + 60
    while len(got) < len(want) and time.time() < deadline:
        for rid, fields in results_after(results["appB"], start):
            res = json.loads(fields[b"result"])
            if res["entry"] in want:
                entry, sent = ms(res["entry"]), res["attempts"][0]["t"]
                got[res["entry"]] = (ms(rid) - entry, sent - entry, entry + res["latency_ms"] - sent, ms(rid) - entry - res["latency_ms"])
        if len(got) < len(want): time.sleep(0.1)
    assert len(got) == len(want), f"B: {len(want) - len(got)} of {len(want)} calls without a result after 60 s"
    stages.append([sorted(s) for s in zip(*got.values())][1:])
    return sorted(v[0] for v in got.values())
stages = []  # per b_latencies: B's XADD -> push sent, sent -> answered, answered -> recorded (sorted, ms)

def a_backlog(on_tick=None):
    """A's backlog written in one second (a pipeline every 10 ms), then drained; `on_tick` runs
    every 10 ms meanwhile (B's calls). A's events/s from its first to its last result."""
    r.delete(results["appA"])  # the last drain's results: read, and the stream's cap must not trim this one's
    start = b"0-0"
    global busy_wall
    cpu0 = cpu_seconds()
    written, t0, batch = 0, time.time(), max(1, backlog // 100)
    done = 0
    while True:
        if written < backlog:
            p = r.pipeline(transaction=False)
            for i in range(written, min(backlog, written + batch)):
                p.xadd(calls["appA"], event(i, f"a{int(t0)}", "aa" * 32))
            p.execute()
            written = min(backlog, written + batch)
        if on_tick: on_tick()
        done = r.xlen(results["appA"])
        if written >= backlog and done >= backlog:
            if on_tick:  # from the first XADD to the last result
                for name, seconds in cpu_seconds().items(): busy[name] = busy.get(name, 0) + seconds - cpu0[name]
                busy_wall += time.time() - t0
            break
        if time.time() - t0 > 300: raise SystemExit(f"A: {done} of {backlog} results after 300 s")
        pause = 0.01 - (time.time() - t0) % 0.01
        time.sleep(pause)
    got = results_after(results["appA"], start)
    assert len(got) == backlog, f"A: {len(got)} results for {backlog} events"
    parsed = [(rid, json.loads(f[b"result"])) for rid, f in got]
    outcomes = {res["outcome"] for _, res in parsed}
    assert outcomes == {"delivered_voip"}, outcomes
    ans = sorted(ms(res["entry"]) + res["latency_ms"] - res["attempts"][0]["t"] for _, res in parsed)
    rec = sorted(ms(rid) - ms(res["entry"]) - res["latency_ms"] for rid, res in parsed)
    print(f"  A drain{' (B calling)' if on_tick else ''}: push sent -> answered p50/p99 {q(ans, 50)}/{q(ans, 99)}, answered -> recorded {q(rec, 50)}/{q(rec, 99)}", flush=True)
    return int((backlog - 1) * 1000 / max(1, ms(got[-1][0]) - ms(got[0][0])))

def b_alone():
    start = last_id(results["appB"])
    sent, t0 = [], time.time()
    while time.time() - t0 < b_seconds:
        sent.append(b_call())
        time.sleep(max(0, t0 + len(sent) / b_rate - time.time()))
    return b_latencies(sent, start)

def q(xs, p):
    return xs[min(len(xs) - 1, max(0, -(-len(xs) * p // 100) - 1))]

alone = b_alone()

start = last_id(results["appB"])
during_sent, t_next = [], [0.0]
def tick():
    if time.time() >= t_next[0]:
        during_sent.append(b_call())
        t_next[0] += 1 / b_rate
a_alone_rates, a_during_rates = [], []
busy, busy_wall = {}, 0.0  # CPU seconds by process, and the wall seconds, of the drains during B's calls
for _ in range(drains):  # alternated, so a drift of the machine touches both alike
    a_alone_rates.append(a_backlog())
    t_next[0] = time.time()
    a_during_rates.append(a_backlog(tick))
a_alone, a_during = q(sorted(a_alone_rates), 50), q(sorted(a_during_rates), 50)
during = b_latencies(during_sent, start)

print(f"{'B: XADD -> result (ms)':30s} {'calls':>6s} {'p50':>6s} {'p99':>6s} {'max':>6s}")
print(f"{'alone':30s} {len(alone):6d} {q(alone, 50):6d} {q(alone, 99):6d} {alone[-1]:6d}")
print(f"{'during A backlog':30s} {len(during):6d} {q(during, 50):6d} {q(during, 99):6d} {during[-1]:6d}")
for name, (sent, answered, recorded) in zip(("alone", "during A backlog"), stages):
    print(f"  {name}, p50/p99 of: XADD -> push sent {q(sent, 50)}/{q(sent, 99)}, sent -> answered "
          f"{q(answered, 50)}/{q(answered, 99)}, answered -> recorded {q(recorded, 50)}/{q(recorded, 99)}")
print(f"  % of a core during A's drains with B's calls ({os.cpu_count()} cores): " + ", ".join(f"{name} {100 * seconds / busy_wall:.0f}" for name, seconds in busy.items()))
ratio = q(during, 99) / max(1, q(alone, 99))
if mode == "shared":
    print(f"B p99 during / alone: {ratio:.2f} (target: <= 2, and p99 during under 20 ms: {q(during, 99)} ms)")
    print(f"A drain ({drains} drains each, medians): alone {a_alone} events/s, during B's calls {a_during} events/s, ratio {a_during / max(1, a_alone):.2f} (target: within 10 %)")
else:
    print(f"B p99 during / alone: {ratio:.2f}; A drain: alone {a_alone} events/s, during B's calls {a_during} events/s")
with open(sys.argv[6], "w") as f:
    json.dump({"b_alone_p99": q(alone, 99), "b_during_p99": q(during, 99), "a_alone": a_alone, "a_during": a_during}, f)
PY

echo "== Fairness: app B at $B_RATE calls/s alone ($B_SECONDS s) and while app A drains $BACKLOG events written in 1 s ($DRAINS times); one pushgw run, A and B on one credential, the APNs simulator answering at once"
start_gateway shared "$app_a, $app_b"
shared=$gateway
PYTHONPATH=bench python3 "$work/fairness.py" "$rport" "$B_RATE" "$B_SECONDS" "$BACKLOG" shared "$work/shared.json" "$DRAINS" "gateway=$shared" "redis=$(redis_server_pid "$rport")" "simulator=$simulator"
[ "${FAIR_FLOOR:-1}" = 0 ] && exit 0
stop_gateway "$shared"

echo "-- the isolation floor: the same, A and B each routed by its own pushgw run (the same Redis, simulator and cores)"
start_gateway only-a "$app_a"
only_a=$gateway
start_gateway only-b "$app_b"
only_b=$gateway
PYTHONPATH=bench python3 "$work/fairness.py" "$rport" "$B_RATE" "$B_SECONDS" "$BACKLOG" split "$work/split.json" "$DRAINS" "gateways=$only_a" "gateways=$only_b" "redis=$(redis_server_pid "$rport")" "simulator=$simulator"
stop_gateway "$only_a"; stop_gateway "$only_b"
python3 - "$work/shared.json" "$work/split.json" <<'PY'
import json, sys
shared, split = (json.load(open(p)) for p in sys.argv[1:3])
print(f"B p99 during A's drain: shared gateway {shared['b_during_p99']} ms, isolation floor {split['b_during_p99']} ms, "
      f"ratio {shared['b_during_p99'] / max(1, split['b_during_p99']):.2f} (what pushgw's sharing costs over the machine's floor); "
      f"A drain: shared {shared['a_during']} events/s, floor {split['a_during']} events/s")
PY
