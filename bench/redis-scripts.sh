#!/usr/bin/env bash
# What each event costs Redis, by command and Lua script: a drain of EVENTS single-device call
# events (4 apps, pushgw run --role router against nghttpd) with Redis' slow log recording every
# command (slowlog-log-slower-than 0), whose durations are summed per command, and per script
# (EVALSHA's SHA-1 named through `pushgw-bench scripts`). Beside them, redis-server's own CPU
# per event over the same drain (its process time: parsing, networking, the commands), and,
# when H2LOAD_CPU_US is given (bench/run.sh passes h2load's CPU per request of the same run),
# the ratio the cost issue targets (<= 2x). Run by bench/run.sh; alone: PUSHGW_BIN=… bench/redis-scripts.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=pushgw-redis-scripts
source bench/common.sh
bin=${PUSHGW_BIN:-$(swift build -c release --show-bin-path)}
EVENTS=${BENCH_SCRIPT_EVENTS:-20000}

start_nghttpd_and_redis
redis_pid=$(redis-cli -p "$rport" INFO server | awk -F: '/^process_id/ {print $2}' | tr -d '\r')
write_router_config "$work/gw.json" "$rport" "$port" "$pki" "$(free_port)"
"$bin/pushgw-bench" scripts > "$work/scripts.json"
redis-cli -p "$rport" FLUSHALL >/dev/null
prefill_calls "$rport" "$EVENTS" "$tokens"
redis-cli -p "$rport" CONFIG SET slowlog-max-len 2000000 >/dev/null
redis-cli -p "$rport" CONFIG SET slowlog-log-slower-than 0 >/dev/null
redis-cli -p "$rport" SLOWLOG RESET >/dev/null
cpu0=$(proc_cpu "$redis_pid")
"$bin/pushgw" run --config "$work/gw.json" --role router --consumer bench-scripts >/dev/null 2>&1 &
gw=$!
pids+=("$gw")
for _ in $(seq 1 1200); do [ "$(results_total "$rport")" -ge "$EVENTS" ] && break; sleep 0.1; done
kill -TERM "$gw"; wait "$gw" || true
forget_pid "$gw"
cpu1=$(proc_cpu "$redis_pid")
redis-cli -p "$rport" CONFIG SET slowlog-log-slower-than 10000 >/dev/null
echo "== Redis per event, by command and script: $EVENTS single-device events drained by pushgw run --role router (Redis' slow log, every command)"
python3 - "$rport" "$EVENTS" "$work/scripts.json" "$cpu0" "$cpu1" "${H2LOAD_CPU_US:-}" <<'PY'
import collections, hashlib, json, sys
import redis
port, events, scripts, cpu0, cpu1, h2 = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
names = {hashlib.sha1(src.encode()).hexdigest(): name for name, src in json.load(open(scripts)).items()}
r = redis.Redis(port=port)
log = r.execute_command("SLOWLOG", "GET", "-1")
usec, calls = collections.Counter(), collections.Counter()
inner = 0
for entry in log:
    # A command a script ran is logged too, from client "?:0": its time is in its script's.
    addr = entry[4] if isinstance(entry, (list, tuple)) and len(entry) > 4 else b""
    if (addr.decode() if isinstance(addr, bytes) else str(addr)).startswith("?"):
        inner += 1
        continue
    args = entry[3] if isinstance(entry, (list, tuple)) else entry["command"]
    if isinstance(args, (bytes, str)):
        args = args.split()
    args = [a.decode(errors="replace") if isinstance(a, bytes) else str(a) for a in args]
    cmd = args[0].lower()
    if cmd in ("slowlog", "config", "info", "client", "hello", "ping", "script", "flushall"):
        continue
    key = f"script {names.get(args[1].lower(), args[1][:8])}" if cmd == "evalsha" and len(args) > 1 else cmd
    usec[key] += int(entry[2] if isinstance(entry, (list, tuple)) else entry["duration"])
    calls[key] += 1
total = sum(usec.values())
print(f"{'':28s} {'calls/event':>12s} {'µs/event':>10s} {'share':>7s}   (time in the command, as the slow log has it)")
for key, us in usec.most_common():
    if us / total < 0.001:
        continue
    print(f"{key:28s} {calls[key] / events:12.3f} {us / events:10.2f} {us / total:7.1%}")
print(f"{'commands, all':28s} {sum(calls.values()) / events:12.3f} {total / events:10.2f}   "
      f"(besides {inner / events:.2f} commands/event run inside the scripts, counted in theirs)")
cpu = (cpu1 - cpu0) * 1e6 / events
line = f"{'redis-server CPU per event':28s} {'':12s} {cpu:10.1f}   (the process: commands, parsing, networking; the slow log's own work included)"
if h2:
    line += f"; {cpu / float(h2):.1f}x h2load's {float(h2):.1f} µs per request (target <= 2.0x)"
print(line)
PY
