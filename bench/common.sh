# Sourced by the bench scripts (run.sh, soak.sh, metrics-flood.sh): a scratch directory
# `work` removed at exit with every process whose pid is added to `pids`, and the helpers
# they share. Set `scratch` (the directory's name prefix) before sourcing.
work=$(mktemp -d "/tmp/${scratch:-pushgw-bench}.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_port() { for _ in $(seq 1 200); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done; echo "nothing on port $1" >&2; exit 1; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }

# The four device tokens nghttpd answers for (files under $work/htdocs), as `tokens`.
make_tokens() {
  tokens=""
  mkdir -p "$work/htdocs/3/device"
  for i in 1 2 3 4; do
    t=$(printf '%02x' "$i"); t=$(printf "$t%.0s" $(seq 1 32))
    echo '{}' > "$work/htdocs/3/device/$t"; tokens="$tokens,$t"
  done
  tokens=${tokens#,}
}

# EVENTS call events (`incoming_call`, one VoIP token each, round robin over `tokens`) across
# apps app0..app3, as producers write them: prefill_calls REDIS_PORT EVENTS TOKENS.
prefill_calls() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys, redis
port, n, tokens = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split(",")
r = redis.Redis(port=port); p = r.pipeline(transaction=False)
for i in range(n):
    ev = {"v": 1, "id": f"t-{i}", "type": "incoming_call", "voip_token": tokens[i % len(tokens)],
          "voip": {"caller": "+15551234567", "callerName": "Alice Johnson", "sessionId": "abc-123-def", "hasVideo": False}}
    p.xadd(f"pushgw:{{app{i % 4}}}:calls", {"event": json.dumps(ev, separators=(",", ":"))})
    if i % 5000 == 4999: p.execute()
p.execute()
PY
}

# The config of `pushgw run --role router` for apps app0..app3 on one credential, with its
# defaults (info log, metrics, admin endpoint): write_router_config FILE REDIS_PORT APNS_PORT PKI ADMIN_PORT.
write_router_config() {
  python3 - "$@" <<'PY'
import json, sys
path, rport, port, pki, admin = sys.argv[1:]
app = {"bundle_id": "com.example.app", "credential": "k", "environment": "production", "ring_timeout_s": 600}
json.dump({"redis": {"url": f"redis://127.0.0.1:{rport}/0"}, "admin": {"listen": f"127.0.0.1:{admin}"},
           "apns": {"production": {"endpoint": f"127.0.0.1:{port}"}, "sandbox": {"endpoint": f"127.0.0.1:{port}"},
                    "ca_file": f"{pki}/ca.pem", "connections": 2, "max_queued": 20000},
           "credentials": {"k": {"team_id": "TEAM123456", "key_id": "KEY1234567", "key_file": f"{pki}/AuthKey.p8"}},
           "apps": {f"app{i}": app for i in range(4)}}, open(path, "w"))
PY
}

# Results written so far in app0..app3, in one cheap redis-cli call (a Python start-up per
# poll would take CPU from the gateway being measured): results_total REDIS_PORT.
results_total() {
  redis-cli -p "$1" EVAL "local n = 0 for _, k in ipairs(KEYS) do n = n + redis.call('XLEN', k) end return n" 4 \
    'pushgw:{app0}:results' 'pushgw:{app1}:results' 'pushgw:{app2}:results' 'pushgw:{app3}:results'
}

# Events/s of a finished drain of N events: (N - 1) over the milliseconds between the first
# and the last result's entry ids; checks that every event has its result: results_rate REDIS_PORT N.
results_rate() {
  python3 - "$1" "$2" <<'PY'
import sys, redis
r = redis.Redis(port=int(sys.argv[1])); n = int(sys.argv[2])
keys = [f"pushgw:{{app{i}}}:results" for i in range(4)]
assert sum(r.xlen(k) for k in keys) == n, "every event has its result"
ms = lambda entry_id: int(entry_id.split(b"-")[0])
first = min(ms(r.xrange(k, count=1)[0][0]) for k in keys)
last = max(ms(r.xrevrange(k, count=1)[0][0]) for k in keys)
print(int((n - 1) * 1000 / max(1, last - first)))
PY
}

# CPU seconds (user + system) of a process so far, from /proc/PID/stat.
proc_cpu_py=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/proc_cpu.py
proc_cpu() { python3 "$proc_cpu_py" "$1"; }

# Takes a finished process's pid out of `pids` (exactly, not by substring).
forget_pid() { local keep=() p; for p in "${pids[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done; pids=("${keep[@]}"); }

# A PKI (`pki`), the four tokens (`tokens`), nghttpd answering them on `port` and a
# redis-server without persistence on `rport`, both on loopback and in `pids`.
start_nghttpd_and_redis() {
  scripts/make-pki.sh "$work/pki" com.example.app >/dev/null
  pki=$work/pki
  make_tokens
  port=$(free_port)
  nghttpd -a 127.0.0.1 -d "$work/htdocs" "$port" "$pki/server.key" "$pki/server.pem" >/dev/null 2>&1 &
  pids+=($!)
  wait_port "$port"
  rport=$(free_port)
  redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --daemonize no --logfile "$work/redis.log" &
  pids+=($!)
  wait_port "$rport"
}

# The APNs simulator of BIN (`BIN simulator`) on a free loopback port, with the PKI's server
# certificate and token key, the bench's bundle id and no request log, and EXTRA (further JSON
# members of its config, each followed by a comma): start_simulator BIN 'EXTRA'. Its port in
# `sport`, its pid in `pids`.
start_simulator() {
  sport=$(free_port)
  cat > "$work/simulator-$sport.json" <<JSON
{ $2 "cert_file": "$pki/server.pem", "key_file": "$pki/server.key",
  "token_keys": { "KEY1234567": "$pki/AuthKey.p8" }, "team_id": "TEAM123456",
  "bundle_ids": ["com.example.app"], "record_limit": 0 }
JSON
  "$1" simulator --config "$work/simulator-$sport.json" --port "$sport" > "$work/simulator-$sport.out" 2>&1 &
  pids+=($!)
  wait_port "$sport"
}

# Runs `pushgw run --role router` (BIN/pushgw, config CONFIG) until the 4 apps' results streams
# hold EVENTS results, then stops it: drain_router BIN CONFIG REDIS_PORT EVENTS CONSUMER.
# The pid of the redis-server on port $1 (its process CPU is read from /proc).
redis_server_pid() { redis-cli -p "$1" INFO server | awk -F: '/^process_id/ {print $2}' | tr -d '\r'; }

drain_router() {
  "$1/pushgw" run --config "$2" --role router --consumer "$5" >/dev/null 2>&1 &
  local gw=$!
  pids+=("$gw")
  for _ in $(seq 1 1200); do [ "$(results_total "$3")" -ge "$4" ] && break; sleep 0.1; done
  kill -TERM "$gw"; wait "$gw" || true
  forget_pid "$gw"
}

# h2load's CPU per request, µs, for N VoIP pushes of BODY (2 connections x 100 streams, as
# bench/run.sh runs it) to token TOKEN at nghttpd on PORT, signed with JWT: run by python,
# which reads the child's CPU time (RUSAGE_CHILDREN) afterwards.
# h2load_cpu_us N BODY JWT PORT TOKEN.
h2load_cpu_us() {
  python3 -c 'import resource,subprocess,sys
subprocess.run(sys.argv[2:], capture_output=True)
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f"{(r.ru_utime + r.ru_stime) * 1e6 / int(sys.argv[1]):.2f}")' "$1" h2load -n "$1" -c 2 -m 100 -d "$2" \
    -H 'apns-push-type: voip' -H 'apns-topic: com.example.app.voip' -H 'apns-priority: 10' \
    -H 'apns-expiration: 0' -H "authorization: bearer $3" "https://127.0.0.1:$4/3/device/$5"
}
