#!/usr/bin/env bash
# What each event costs Redis, by command and Lua script, in two drains of EVENTS single-device
# call events each (4 apps, pushgw run --role router against nghttpd):
# 1. redis-server's own CPU per event (its process time: parsing, networking, the commands; the
#    median of ROUNDS drains) and
#    INFO commandstats per command (the commands scripts run counted under their own names as
#    well as in EVALSHA's time), with nothing else recording;
# 2. Redis' slow log recording every command (slowlog-log-slower-than 0), whose durations are
#    summed per command, and per script (EVALSHA's SHA-1 named through `pushgw-bench scripts`).
# Beside them h2load's CPU per request against the same nghttpd (H2LOAD_CPU_US when bench/run.sh
# passes the figure of its run; else measured here, EVENTS requests, 2 connections x 100 streams),
# and the ratio the cost issue targets (<= 2x).
# Run by bench/run.sh; alone: PUSHGW_BIN=… bench/redis-scripts.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=pushgw-redis-scripts
source bench/common.sh
bin=${PUSHGW_BIN:-$(swift build -c release --show-bin-path)}
bench_bin=${PUSHGW_BENCH_BIN:-$bin}  # pushgw-bench: the scripts' names and h2load's JWT
EVENTS=${BENCH_SCRIPT_EVENTS:-20000}
ROUNDS=${BENCH_SCRIPT_ROUNDS:-3}

start_nghttpd_and_redis
redis_pid=$(redis_server_pid "$rport")
write_router_config "$work/gw.json" "$rport" "$port" "$pki" "$(free_port)"
# COMPACT=1 (and FILL_BUCKETS): the apps keep the compact record (retention.result_detail_s 900,
# off by default: config/README.md), to measure what it costs Redis.
if [ -n "${COMPACT:-}${FILL_BUCKETS:-}" ]; then
  python3 - "$work/gw.json" <<'PY'
import json, sys
config = json.load(open(sys.argv[1]))
for app in config["apps"].values():
    app["retention"] = {"result_detail_s": 900}
json.dump(config, open(sys.argv[1], "w"))
PY
fi
"$bench_bin/pushgw-bench" scripts > "$work/scripts.json"
# FILL_BUCKETS=N: before each drain, the five live outcomes buckets of each app (the default
# 24 h window: a bucket per 21,600 s) hold N calls each, as in production once a window has
# passed, so the lookups' HMGETs find full hashes (by default they are empty but the current one).
fill_buckets() {
  local b=$(( $(date +%s) / 21600 ))
  for app in app0 app1 app2 app3; do for k in 0 1 2 3 4; do
    redis-cli -p "$rport" EVAL "for i = 1, tonumber(ARGV[1]) do redis.call('HSET', KEYS[1], ARGV[2] .. i, 'v') end redis.call('EXPIRE', KEYS[1], 3600)" \
      1 "pushgw:{$app}:outcomes:$((b - k))" "$1" "00000000-0000-0000-0000-$k" >/dev/null
  done; done
}
# One drain: the calls pre-filled, then whatever "$@" says (the counters' reset), then pushgw
# run until every event has its result.
drain() {
  redis-cli -p "$rport" FLUSHALL >/dev/null
  prefill_calls "$rport" "$EVENTS" "$tokens"
  [ -z "${FILL_BUCKETS:-}" ] || fill_buckets "$FILL_BUCKETS"
  "$@"
  drain_router "$bin" "$work/gw.json" "$rport" "$EVENTS" bench-scripts
}
# Drain 1, ROUNDS times (redis-server's CPU per event is the median; commandstats the last round's).
reset_stats() { redis-cli -p "$rport" CONFIG RESETSTAT >/dev/null; cpu0=$(proc_cpu "$redis_pid"); }
cpus=()
for _ in $(seq 1 "$ROUNDS"); do
  drain reset_stats
  cpus+=("$(python3 -c "print(f'{($(proc_cpu "$redis_pid") - $cpu0) * 1e6 / $EVENTS:.1f}')")")
done
cpu=$(printf '%s\n' "${cpus[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
redis-cli -p "$rport" INFO commandstats > "$work/commandstats.txt"
start_slowlog() {
  redis-cli -p "$rport" CONFIG SET slowlog-max-len 2000000 >/dev/null
  redis-cli -p "$rport" CONFIG SET slowlog-log-slower-than 0 >/dev/null
  redis-cli -p "$rport" SLOWLOG RESET >/dev/null
}
drain start_slowlog
redis-cli -p "$rport" CONFIG SET slowlog-log-slower-than 10000 >/dev/null
h2=${H2LOAD_CPU_US:-}
if [ -z "$h2" ]; then
  token=${tokens%%,*}
  python3 -c "print('{\"caller\":\"+15551234567\",\"callerName\":\"Alice Johnson\",\"pad\":\"'+'x'*250+'\"}', end='')" > "$work/body.json"
  jwt=$("$bench_bin/pushgw-bench" jwt --key "$pki/AuthKey.p8")
  h2=$(h2load_cpu_us "$EVENTS" "$work/body.json" "$jwt" "$port" "$token")
fi
echo "== Redis per event, by command and script: two drains of $EVENTS single-device events by pushgw run --role router (1: INFO commandstats; 2: Redis' slow log, every command)"
python3 - "$rport" "$EVENTS" "$work/scripts.json" "$cpu" "${cpus[*]}" "$h2" "$work/commandstats.txt" <<'PY'
import collections, hashlib, json, sys
import redis
port, events, scripts, cpu, rounds, h2 = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), sys.argv[5], sys.argv[6]
stats = {}
for line in open(sys.argv[7]):
    if line.startswith("cmdstat_"):
        name, fields = line.strip()[8:].split(":", 1)
        f = dict(kv.split("=") for kv in fields.split(","))
        if name not in ("config", "info", "flushall", "client", "hello", "ping", "script", "eval"):
            stats[name] = (int(f["calls"]), int(f["usec"]))
print(f"{'INFO commandstats':28s} {'calls/event':>12s} {'µs/event':>10s}   (drain 1, no slow log; a script's commands in its EVALSHA and under their names)")
for name, (calls, us) in sorted(stats.items(), key=lambda kv: -kv[1][1]):
    if calls / events >= 0.001:
        print(f"{name:28s} {calls / events:12.3f} {us / events:10.2f}")
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
print(f"{'':28s} {'calls/event':>12s} {'µs/event':>10s} {'share':>7s}   (drain 2: time in the command, as the slow log has it)")
for key, us in usec.most_common():
    if us / total < 0.001:
        continue
    print(f"{key:28s} {calls[key] / events:12.3f} {us / events:10.2f} {us / total:7.1%}")
print(f"{'commands, all':28s} {sum(calls.values()) / events:12.3f} {total / events:10.2f}   "
      f"(besides {inner / events:.2f} commands/event run inside the scripts, counted in theirs)")
line = f"{'redis-server CPU per event':28s} {'':12s} {cpu:10.1f}   (drain 1, median of {rounds}: the process, commands, parsing, networking)"
if h2:
    line += f"; {cpu / float(h2):.1f}x h2load's {float(h2):.1f} µs per request (target <= 2.0x)"
print(line if h2 else line + "; no h2load figure")
PY
