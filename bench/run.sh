#!/usr/bin/env bash
# make bench: pushgw's figures beside reference tools run in the same invocation, against
# the same servers on loopback, alternating runs and quoting medians (a shared machine
# moves absolute figures by ±30 %; the ratio is what to read).
#
#   APNs client: pushgw-bench apns vs h2load against one nghttpd in static-file mode,
#   1 and 4 connections × 100 streams; ratio pushgw/h2load (target ≥ 1.0) and pushgw's
#   peak RSS (target ≤ 30 MB).
#   End to end: 100,000 call events pre-filled in a private redis-server across 4 apps,
#   routed by pushgw to the same nghttpd; events/s beside h2load's requests/s with the
#   same connections (a ratio with no target: h2load does no Redis work), and the same for the binary (`pushgw run --role
#   router` with its defaults, rate read from the results' entry ids); then a steady 2,000
#   events/s for 5 s, XADD to recorded outcome p50/p99 (targets ≤ 2 ms, ≤ 10 ms), and the p99
#   again while 4 threads fetch /metrics from the admin endpoint back to back, and again while
#   a browser-like client loads operators' console pages 10 times a second; peak RSS
#   (target ≤ 64 MB). The same throughput phase again with the router reaching Redis over
#   TLS (rediss://, the same redis-server's TLS port), alternating with the plain runs, and the
#   same phase with calls ringing 3 devices each and answered on one (docs/protocol.md,
#   *Devices*; BENCH_DEVICE_CALLS calls, each answer 2,000 entries after its call): events/s
#   (calls and answers) and CPU per device push beside the 1-device figures. Then the
#   CPU time per event of pushgw, redis-server and nghttpd (and per request of h2load and
#   nghttpd) and the events/s those sums allow on this machine's cores: the ratio's ceiling.
#   The figure that counts: pushgw's CPU per event over h2load's CPU per request (target
#   ≤ 2×), which a shared or small machine moves far less than it moves rates.
#   The call's machine alone (pushgw-bench machine): ns per single-device call through
#   CallStateMachine beside the bare CallRouter's steps, no I/O.
#   Retries: 10,000 retries due over 3 s across 100 apps, scheduled by the router's step and
#   moved by the retry mover; lateness of the moves p50/p99 (target p99 ≤ 50 ms). Then an
#   idle `pushgw run` (router + retry, 100 apps): the commands it sends to Redis per second,
#   counted with MONITOR for 2 s (target: about 20).
#   Redis Cluster (bench/cluster.sh): the binary's end-to-end phase again on a local cluster of
#   three primaries, beside the single Redis figure, and an idle gateway with 100 apps on it.
#   Ring receipts (bench/ring-receipts.sh): `pushgw run` with ring receipts on, 2,000 calls/s
#   for 5 s to the APNs simulator playing the phones (it adds each accepted VoIP push's
#   call_ringing): XADD→APNs-accepted and XADD→ringing p50/p99 of the same calls.
#   HTTP API (bench/ingest.sh): 20,000 call events POSTed to the ingest listener (64 in flight)
#   beside the same count XADDed by a Redis producer: events/s both ways and their ratio, the
#   API's answers/s and accept latency p50/p99/max.
#   Fairness (bench/fairness.sh): `pushgw run` with two apps on one credential, app B at 20
#   calls/s alone and while app A drains a 50,000-event backlog written in 1 s: B's XADD→result
#   p50/p99/max both ways and their p99 ratio (target ≤ 2 and under 20 ms), A's drain rate alone
#   and during (target: within 10 %), over five backlogs each way; B's time by stage and each
#   process's CPU during the drains. Twice: with A at the router's per-app cap (1,000 in flight)
#   and at limits.max_in_flight 100, the trade-off between B's latency and A's rate. The
#   first run also measures the isolation floor: A and B each routed by its own `pushgw run`
#   on the same Redis, simulator and cores, and B's p99 in the shared gateway over that floor's.
#   Redis memory per call (bench/redis-sizing.sh): 5,000 calls of each kind, the drop of
#   `used_memory` when each kind's keys go, and the compact record held for the idempotency
#   window (target ≤ 120 B a call).
#   A/B (bench/ab.sh): `pushgw run --role router` of this checkout against the build before the
#   hardening (AB_REF, default 570948c; built once into .build/reference/), alternated round
#   by round: events/s, CPU per event and peak RSS, then the drain's seconds under a GOAWAY
#   after every 50 requests; each with its ratio (target: ≤ 1 for CPU, RSS and seconds).
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS=${BENCH_REQUESTS:-200000}
ROUNDS=${BENCH_ROUNDS:-3}
bin=$(swift build -c release --show-bin-path)
EVENTS=${BENCH_EVENTS:-100000}
DEVICE_CALLS=${BENCH_DEVICE_CALLS:-$((EVENTS / 2))}
scratch=pushgw-bench
. bench/common.sh

scripts/make-pki.sh "$work/pki" com.example.app >/dev/null
pki=$work/pki
token=$(printf 'ab%.0s' $(seq 1 32))
mkdir -p "$work/htdocs/3/device"
echo '{}' > "$work/htdocs/3/device/$token"
python3 -c "print('{\"caller\":\"+15551234567\",\"callerName\":\"Alice Johnson\",\"pad\":\"'+'x'*250+'\"}', end='')" > "$work/body.json"
# FCM: the token endpoint's answer and the send path as static files, a service account whose
# token_uri is nghttpd (written once the port is known) and a ring's body for h2load.
mkdir -p "$work/htdocs/v1/projects/pushgw-test"
echo '{"access_token":"ya29.bench","expires_in":3600,"token_type":"Bearer"}' > "$work/htdocs/token"
echo '{"name":"projects/pushgw-test/messages/1"}' > "$work/htdocs/v1/projects/pushgw-test/messages:send"
python3 -c "print('{\"message\":{\"token\":\"bench-device:APA91bH\",\"android\":{\"priority\":\"HIGH\",\"ttl\":\"27s\",\"collapse_key\":\"call-1\"},\"data\":{\"caller\":\"+15551234567\",\"callerName\":\"Alice Johnson\",\"deadline\":\"1700000027999\",\"id\":\"call-1\",\"pad\":\"'+'x'*200+'\",\"type\":\"incoming_call\"}}}', end='')" > "$work/fcm-body.json"

port=$(free_port)
nghttpd -a 127.0.0.1 -d "$work/htdocs" "$port" "$pki/server.key" "$pki/server.pem" >/dev/null 2>&1 &
nghttpd_pid=$!
pids+=($!)
wait_port "$port"
jwt=$("$bin/pushgw-bench" jwt --key "$pki/AuthKey.p8")

echo "== APNs client: $REQUESTS POSTs (VoIP, 300-byte body, JWT) to nghttpd static-file mode on 127.0.0.1, TLS, ${ROUNDS} alternating rounds, medians"
printf '%-22s %14s %14s %8s %14s\n' "connections x streams" "h2load req/s" "pushgw req/s" "ratio" "pushgw peak RSS"
for c in 1 4; do
  h=(); p=(); rss=(); apns_cpu=()
  for _ in $(seq 1 "$ROUNDS"); do
    h+=("$(h2load -n "$REQUESTS" -c "$c" -m 100 -d "$work/body.json" \
        -H 'apns-push-type: voip' -H 'apns-topic: com.example.app.voip' -H 'apns-priority: 10' \
        -H 'apns-expiration: 0' -H "authorization: bearer $jwt" \
        "https://127.0.0.1:$port/3/device/$token" | awk '/^finished in/ {print int($4)}')")
    out=$("$bin/pushgw-bench" apns --port "$port" --ca "$pki/ca.pem" --key "$pki/AuthKey.p8" --token "$token" \
          --connections "$c" --streams 100 --requests "$REQUESTS")
    p+=("$(echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["ok"]==d["requests"], d; print(d["rps"])')")
    rss+=("$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["peak_rss_mb"])')")
    apns_cpu+=("$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["cpu_us_per_request"])')")
  done
  hm=$(printf '%s\n' "${h[@]}" | median); pm=$(printf '%s\n' "${p[@]}" | median)
  peak=$(printf '%s\n' "${rss[@]}" | sort -n | tail -1)
  printf '%-22s %14s %14s %8s %12s MB\n' "$c x 100" "$hm" "$pm" "$(python3 -c "print(f'{$pm/$hm:.2f}')")" "$peak"
done
echo "(targets: ratio >= 1.0, peak RSS <= 30 MB; each h2load and pushgw run: ${h[*]} / ${p[*]} for the last row)"

python3 - "$port" "$pki/fcm-service-account.key" "$work/fcm-account.json" <<'PY'
import json, sys
json.dump({"type": "service_account", "project_id": "pushgw-test", "private_key_id": "bench", "private_key": open(sys.argv[2]).read(),
           "client_email": "bench@pushgw-test.iam.gserviceaccount.com", "token_uri": f"https://127.0.0.1:{sys.argv[1]}/token"},
          open(sys.argv[3], "w"))
PY
echo "== FCM client: $REQUESTS messages:send POSTs (a ring: data only, HIGH, 27 s TTL, ~400-byte body, Bearer token) to the same nghttpd, ${ROUNDS} alternating rounds, medians"
printf '%-22s %14s %14s %8s %14s %18s\n' "connections x streams" "h2load req/s" "pushgw req/s" "ratio" "pushgw peak RSS" "pushgw CPU/push"
h=(); p=(); rss=(); fcm_cpu=()
for _ in $(seq 1 "$ROUNDS"); do
  h+=("$(h2load -n "$REQUESTS" -c 1 -m 100 -d "$work/fcm-body.json" -H 'content-type: application/json' \
      -H 'authorization: Bearer ya29.bench' "https://127.0.0.1:$port/v1/projects/pushgw-test/messages:send" \
      | awk '/^finished in/ {print int($4)}')")
  out=$("$bin/pushgw-bench" fcm --port "$port" --ca "$pki/ca.pem" --account "$work/fcm-account.json" \
        --connections 1 --streams 100 --requests "$REQUESTS")
  p+=("$(echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["ok"]==d["requests"], d; print(d["rps"])')")
  rss+=("$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["peak_rss_mb"])')")
  fcm_cpu+=("$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["cpu_us_per_request"])')")
done
hm=$(printf '%s\n' "${h[@]}" | median); pm=$(printf '%s\n' "${p[@]}" | median)
printf '%-22s %14s %14s %8s %12s MB %15s µs\n' "1 x 100" "$hm" "$pm" "$(python3 -c "print(f'{$pm/$hm:.2f}')")" \
  "$(printf '%s\n' "${rss[@]}" | sort -n | tail -1)" "$(printf '%s\n' "${fcm_cpu[@]}" | median)"
echo "(beside the APNs client's CPU per push above, last row: $(printf '%s\n' "${apns_cpu[@]}" | median) µs; each h2load and pushgw run: ${h[*]} / ${p[*]})"

# The same two clients against the simulator (pushgw simulator: APNs' /3/device and FCM's token
# endpoint and messages:send, each request judged as the real service would), alternating.
start_simulator "$bin/pushgw" '"raised_max_streams": 1000,
  "fcm_service_accounts": { "bench@pushgw-test.iam.gserviceaccount.com": "'"$pki"'/fcm-service-account.pub.pem" },'
sim_port=$sport
python3 - "$sim_port" "$work/fcm-account.json" "$work/fcm-account-sim.json" <<'PY'
import json, sys
account = json.load(open(sys.argv[2]))
account["token_uri"] = f"https://127.0.0.1:{sys.argv[1]}/token"
json.dump(account, open(sys.argv[3], "w"))
PY
echo "== APNs and FCM clients against the simulator: $REQUESTS requests each, 1 connection x 100 streams, ${ROUNDS} alternating rounds, medians"
printf '%-10s %14s %18s %14s\n' "provider" "pushgw req/s" "pushgw CPU/push" "peak RSS"
sa=(); sa_cpu=(); sa_rss=(); sf=(); sf_cpu=(); sf_rss=()
for _ in $(seq 1 "$ROUNDS"); do
  out=$("$bin/pushgw-bench" apns --port "$sim_port" --ca "$pki/ca.pem" --key "$pki/AuthKey.p8" --token "$token" \
        --connections 1 --streams 100 --requests "$REQUESTS")
  sa+=("$(echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["ok"]==d["requests"], d; print(d["rps"])')")
  sa_cpu+=("$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["cpu_us_per_request"])')")
  sa_rss+=("$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["peak_rss_mb"])')")
  out=$("$bin/pushgw-bench" fcm --port "$sim_port" --ca "$pki/ca.pem" --account "$work/fcm-account-sim.json" \
        --connections 1 --streams 100 --requests "$REQUESTS")
  sf+=("$(echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["ok"]==d["requests"], d; print(d["rps"])')")
  sf_cpu+=("$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["cpu_us_per_request"])')")
  sf_rss+=("$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["peak_rss_mb"])')")
done
printf '%-10s %14s %15s µs %11s MB\n' "APNs" "$(printf '%s\n' "${sa[@]}" | median)" "$(printf '%s\n' "${sa_cpu[@]}" | median)" \
  "$(printf '%s\n' "${sa_rss[@]}" | sort -n | tail -1)"
printf '%-10s %14s %15s µs %11s MB\n' "FCM" "$(printf '%s\n' "${sf[@]}" | median)" "$(printf '%s\n' "${sf_cpu[@]}" | median)" \
  "$(printf '%s\n' "${sf_rss[@]}" | sort -n | tail -1)"
echo "(the simulator judges every request: its own CPU is on the same 2 cores; each run: APNs ${sa[*]} / FCM ${sf[*]})"

# ---- End to end --------------------------------------------------------------------------
make_tokens
rport=$(free_port)
tport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --daemonize no --logfile "$work/redis.log" \
  --tls-port "$tport" --tls-cert-file "$pki/redis.pem" --tls-key-file "$pki/redis.key" --tls-ca-cert-file "$pki/ca.pem" \
  --tls-auth-clients no &
redis_pid=$!
pids+=($!)
wait_port "$rport"
echo
echo "== End to end: $EVENTS events pre-filled across 4 apps in redis-server, routed by pushgw to the same nghttpd (2 connections x 100 streams)"
e2e_rps=(); e2e_tls=(); e2e_h2=(); p50=(); p99=(); flood99=(); console99=(); rss=(); cpu_gw=(); cpu_redis=(); cpu_ng=(); cpu_h2=(); cpu_h2ng=()
e2e3_rps=(); push1_gw=(); push3_gw=()
# EVENTS call events across apps app0..app3 (the tokens nghttpd has files for), as producers write them.
prefill() { prefill_calls "$rport" "$EVENTS" "$tokens"; }
# DEVICE_CALLS calls ringing 3 devices each (the same 4 tokens as VoIP and alert tokens), each
# answered on its first device by a call_answered written 2,000 entries after it, across apps
# app0..app3: 500 per app, five reads later (a call starts after the read that follows its
# own, so an answer one read behind would stop it before it rang), and below the app's
# in-flight cap (1,000), which a call waiting for its answer counts in.
prefill_devices() {
  python3 - "$rport" "$DEVICE_CALLS" "$tokens" <<'PY'
import json, sys, redis
port, n, tokens = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3].split(",")
r = redis.Redis(port=port); p = r.pipeline(transaction=False)
lag = 2000
def answer(i):
    ev = {"v": 1, "id": f"d-{i}", "type": "call_answered", "device": "dev-0"}
    p.xadd(f"pushgw:{{app{i % 4}}}:calls", {"event": json.dumps(ev, separators=(",", ":"))})
for i in range(n):
    devices = [{"id": f"dev-{d}", "voip_token": tokens[(3 * i + d) % len(tokens)], "alert_token": tokens[(3 * i + d) % len(tokens)]}
               for d in range(3)]
    ev = {"v": 1, "id": f"d-{i}", "type": "incoming_call", "devices": devices,
          "voip": {"caller": "+15551234567", "callerName": "Alice Johnson", "sessionId": "abc-123-def", "hasVideo": False}}
    p.xadd(f"pushgw:{{app{i % 4}}}:calls", {"event": json.dumps(ev, separators=(",", ":"))})
    if i >= lag: answer(i - lag)
    if i % 5000 == 4999: p.execute()
for i in range(max(0, n - lag), n): answer(i)
p.execute()
PY
}
for _ in $(seq 1 "$ROUNDS"); do
  redis-cli -p "$rport" FLUSHALL >/dev/null
  prefill
  out=$("$bin/pushgw-bench" e2e --redis "redis://127.0.0.1:$rport/0" --port "$port" --ca "$pki/ca.pem" --key "$pki/AuthKey.p8" \
        --tokens "$tokens" --apps 4 --events "$EVENTS" --rate 2000 --seconds 5 --connections 2 --scrapers 4 --console-views 10 \
        --peer-pids "redis=$redis_pid,nghttpd=$nghttpd_pid")
  e2e_rps+=("$(echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["delivered"]==d["events"], d; print(d["events_per_s"])')")
  # The same throughput phase over TLS to Redis (its latency phase kept short: not reported).
  redis-cli -p "$rport" FLUSHALL >/dev/null
  prefill
  out_tls=$("$bin/pushgw-bench" e2e --redis "rediss://127.0.0.1:$tport/0" --redis-ca "$pki/ca.pem" --port "$port" --ca "$pki/ca.pem" \
        --key "$pki/AuthKey.p8" --tokens "$tokens" --apps 4 --events "$EVENTS" --rate 100 --seconds 1 --connections 2)
  e2e_tls+=("$(echo "$out_tls" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["delivered"]==d["events"], d; print(d["events_per_s"])')")
  # Calls ringing 3 devices, each answered on one: its calls and answers are its events.
  redis-cli -p "$rport" FLUSHALL >/dev/null
  prefill_devices
  out3=$("$bin/pushgw-bench" e2e --redis "redis://127.0.0.1:$rport/0" --port "$port" --ca "$pki/ca.pem" --key "$pki/AuthKey.p8" \
        --tokens "$tokens" --apps 4 --events "$((2 * DEVICE_CALLS))" --connections 2 --throughput-only 1 \
        --peer-pids "redis=$redis_pid,nghttpd=$nghttpd_pid")
  e2e3_rps+=("$(echo "$out3" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["pushes"]>0, d; print(d["events_per_s"])')")
  push3_gw+=("$(echo "$out3" | python3 -c 'import json,sys; print(json.load(sys.stdin)["cpu_us_per_push"]["pushgw"])')")
  push1_gw+=("$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["cpu_us_per_push"]["pushgw"])')")
  p50+=("$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["p50_ms"])')")
  p99+=("$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["p99_ms"])')")
  flood99+=("$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["flood_p99_ms"])')")
  console99+=("$(echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["console_failures"]==0, d; print(d["console_p99_ms"])')")
  rss+=("$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["peak_rss_mb"])')")
  for k in pushgw redis nghttpd; do
    v=$(echo "$out" | python3 -c "import json,sys; print(json.load(sys.stdin)['cpu_us_per_event']['$k'])")
    case $k in pushgw) cpu_gw+=("$v");; redis) cpu_redis+=("$v");; nghttpd) cpu_ng+=("$v");; esac
  done
  ng0=$(proc_cpu "$nghttpd_pid")
  # h2load run by python, which reads the child's CPU time (RUSAGE_CHILDREN) afterwards.
  h2out=$(python3 -c 'import resource,subprocess,sys
out = subprocess.run(sys.argv[1:], capture_output=True, text=True).stdout
r = resource.getrusage(resource.RUSAGE_CHILDREN)
rps = [l.split()[3] for l in out.splitlines() if l.startswith("finished in")]
print(int(float(rps[0])) if rps else 0, r.ru_utime + r.ru_stime)' h2load -n "$EVENTS" -c 2 -m 100 -d "$work/body.json" \
        -H 'apns-push-type: voip' -H 'apns-topic: com.example.app.voip' -H 'apns-priority: 10' \
        -H 'apns-expiration: 0' -H "authorization: bearer $jwt" "https://127.0.0.1:$port/3/device/$token")
  ng1=$(proc_cpu "$nghttpd_pid")
  e2e_h2+=("${h2out%% *}")
  cpu_h2+=("$(python3 -c "print(f'{${h2out#* } * 1e6 / $EVENTS:.1f}')")")
  cpu_h2ng+=("$(python3 -c "print(f'{($ng1 - $ng0) * 1e6 / $EVENTS:.1f}')")")
done
# The binary: `pushgw run --role router` with its defaults (info log, metrics, admin endpoint),
# on the same pre-filled streams. Its rate is read from the results streams: (N - 1) over the
# milliseconds between the first and the last result's entry ids.
write_router_config "$work/e2e-gw.json" "$rport" "$port" "$pki" "$(free_port)"
run_rps=()
for _ in $(seq 1 "$ROUNDS"); do
  redis-cli -p "$rport" FLUSHALL >/dev/null
  prefill
  drain_router "$bin" "$work/e2e-gw.json" "$rport" "$EVENTS" bench-run
  run_rps+=("$(results_rate "$rport" "$EVENTS")")
done
run_median=$(printf '%s\n' "${run_rps[@]}" | median)
em=$(printf '%s\n' "${e2e_rps[@]}" | median); hm=$(printf '%s\n' "${e2e_h2[@]}" | median)
printf '%-34s %12s\n' "pushgw events/s (XADD'ed to recorded)" "$em"
printf '%-34s %12s\n' "  the same, by pushgw run (binary)" "$run_median"
printf '%-34s %12s\n' "  the same, Redis over TLS" "$(printf '%s\n' "${e2e_tls[@]}" | median)"
printf '%-34s %12s\n' "  3-device calls + answers, events/s" "$(printf '%s\n' "${e2e3_rps[@]}" | median)"
printf '%-34s %12s\n' "h2load requests/s (2 x 100)" "$hm"
printf '%-34s %12s   (no target: h2load does no Redis work; see CPU per event below)\n' "ratio" "$(python3 -c "print(f'{$em/$hm:.2f}')")"
printf '%-34s %12s ms (target <= 2)\n' "p50 XADD -> outcome at 2,000/s" "$(printf '%s\n' "${p50[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
printf '%-34s %12s ms (target <= 10)\n' "p99 XADD -> outcome at 2,000/s" "$(printf '%s\n' "${p99[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
printf '%-34s %12s ms (4 threads fetching /metrics back to back)\n' "  the same under a /metrics flood" "$(printf '%s\n' "${flood99[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
printf '%-34s %12s ms (a client loading console pages 10 times a second)\n' "  the same with the console open" "$(printf '%s\n' "${console99[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
printf '%-34s %12s MB (target <= 64)\n' "pushgw peak RSS" "$(printf '%s\n' "${rss[@]}" | sort -n | tail -1)"
# Where the CPU goes: on a machine where the three processes share the cores, events/s can
# not exceed cores / (CPU per event summed over them), so the ratio cannot exceed the ratio
# of the two sums — whatever the router does, the Redis work is on top of the reference's.
fmed() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
g=$(fmed "${cpu_gw[@]}"); r=$(fmed "${cpu_redis[@]}"); n=$(fmed "${cpu_ng[@]}"); c=$(fmed "${cpu_h2[@]}"); cn=$(fmed "${cpu_h2ng[@]}")
cores=$(nproc)
echo
printf '%-34s %12s %14s\n' "CPU per event, µs (medians)" "pushgw" "h2load"
printf '%-34s %12s %14s\n' "  client: pushgw / h2load" "$g" "$c"
printf '%-34s %12s %14s\n' "  redis-server" "$r" "-"
printf '%-34s %12s %14s\n' "  nghttpd" "$n" "$cn"
a=$(printf '%s\n' "${apns_cpu[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
python3 - "$g" "$r" "$n" "$c" "$cn" "$cores" "$hm" "$a" <<'PY'
import sys
g, r, n, c, cn, cores, h2, a = map(float, sys.argv[1:])
pg, ph = g + r + n, c + cn
print(f"{'  all processes':34s} {pg:12.1f} {ph:14.1f}")
print(f"{'pushgw CPU per event / h2load per request':42s} {g / c:4.1f}x   (target <= 2.0x)")
bound = cores * 1e6 / pg
print(f"{'events/s the pushgw sum allows':34s} {bound:12.0f}   on {cores:.0f} cores: ratio ceiling {bound / h2:.2f} here")
floor = cores * 1e6 / (r + n)
apns_only = cores * 1e6 / (r + n + a)
print(f"{'... if routing cost only the push':34s} {apns_only:12.0f}   (pushgw's APNs client alone, {a:.1f} µs a request above: ratio ceiling {apns_only / h2:.2f} here)")
print(f"{'... if routing cost nothing':34s} {floor:12.0f}   (redis-server + nghttpd alone: ratio ceiling {floor / h2:.2f} here)")
PY

# Redis per event by command and Lua script (bench/redis-scripts.sh), against h2load's CPU per
# request above.
echo
PUSHGW_BIN="$bin" H2LOAD_CPU_US="$c" bench/redis-scripts.sh
echo
printf '%-34s %12s %14s\n' "pushgw CPU per device push, µs" "1-device" "3-device"
printf '%-34s %12s %14s   (medians; a 3-device call: 3 rings and up to 2 ended pushes)\n' "" "$(fmed "${push1_gw[@]}")" "$(fmed "${push3_gw[@]}")"

# The call's machine alone, no I/O: a single-device call through CallStateMachine (lookup,
# VoIP accepted, recorded) beside the same steps on a bare CallRouter, in one process.
mach_ns=(); router_ns=()
for _ in $(seq 1 "$ROUNDS"); do
  out=$("$bin/pushgw-bench" machine --calls 200000)
  mach_ns+=("$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["machine_ns"])')")
  router_ns+=("$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["router_ns"])')")
done
printf '%-34s %12s ns (the bare router: %s ns; medians)\n' "call machine, one 1-device call" \
  "$(printf '%s\n' "${mach_ns[@]}" | median)" "$(printf '%s\n' "${router_ns[@]}" | median)"

# ---- Retries -----------------------------------------------------------------------------
echo
echo "== Retries: 10,000 due over 3 s across 100 apps in redis-server, moved back by pushgw's retry mover, ${ROUNDS} rounds"
rp50=(); rp99=(); rmax=()
for _ in $(seq 1 "$ROUNDS"); do
  redis-cli -p "$rport" FLUSHALL >/dev/null
  out=$("$bin/pushgw-bench" retry-timing --redis "redis://127.0.0.1:$rport/0" --apps 100 --retries 10000 --spread-ms 3000 --lead-ms 4000)
  rp50+=("$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["p50_late_ms"])')")
  rp99+=("$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["p99_late_ms"])')")
  rmax+=("$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["max_late_ms"])')")
done
printf '%-34s %12s ms\n' "p50 lateness of a retry's move" "$(printf '%s\n' "${rp50[@]}" | median)"
printf '%-34s %12s ms (target <= 50)\n' "p99 lateness of a retry's move" "$(printf '%s\n' "${rp99[@]}" | median)"
printf '%-34s %12s ms\n' "worst lateness (any round)" "$(printf '%s\n' "${rmax[@]}" | sort -n | tail -1)"

# An idle gateway: what `pushgw run` sends to Redis with nothing to do (MONITOR lists every
# command a client sends; commands run inside Lua scripts are marked "lua" and not counted).
python3 - "$work/idle-gw.json" "$rport" "$port" "$pki" <<'PY'
import json, sys
path, rport, port, pki = sys.argv[1:]
app = {"bundle_id": "com.example.app", "credential": "k", "environment": "production"}
json.dump({"redis": {"url": f"redis://127.0.0.1:{rport}/0"},
           "apns": {"production": {"endpoint": f"127.0.0.1:{port}"}, "sandbox": {"endpoint": f"127.0.0.1:{port}"},
                    "ca_file": f"{pki}/ca.pem"},
           "credentials": {"k": {"team_id": "TEAM123456", "key_id": "KEY1234567", "key_file": f"{pki}/AuthKey.p8"}},
           "apps": {f"app{i}": app for i in range(100)}}, open(path, "w"))
PY
redis-cli -p "$rport" FLUSHALL >/dev/null
"$bin/pushgw" run --config "$work/idle-gw.json" --consumer bench-idle --log-level error &
gw=$!
pids+=("$gw")
sleep 3
timeout 2 stdbuf -oL redis-cli -p "$rport" monitor > "$work/idle-monitor.txt" || true
kill -TERM "$gw"; wait "$gw" || true
idle=$(grep -E '^[0-9]+\.[0-9]+ \[' "$work/idle-monitor.txt" | grep -vc '\[0 lua\]' || true)
printf '%-34s %12s /s (target: about 20; %s in 2 s)\n' "idle pushgw run, Redis commands" \
  "$(python3 -c "print(f'{$idle/2:.1f}')")" "$(grep -E '^[0-9]+\.[0-9]+ \[' "$work/idle-monitor.txt" | grep -v '\[0 lua\]' \
     | awk '{print $4}' | tr -d '"' | sort | uniq -c | awk '{printf "%s%s %s", sep, $2, $1; sep=", "}')"

echo
echo "== Redis Cluster: the same $EVENTS events across the same 4 apps on three local primaries, pushgw run --role router, ${ROUNDS} rounds"
source bench/cluster.sh

# Ring receipts (bench/ring-receipts.sh): XADD→APNs-accepted and XADD→ringing of the same calls
# at 2,000 events/s, the APNs simulator playing the phones and their app's backend.
echo
PUSHGW_BIN="$bin" bench/ring-receipts.sh

# Fairness (bench/fairness.sh): app B at 20 calls/s alone and while app A drains a 50,000-event
# backlog, one credential; B's XADD→result both ways and A's drain rate both ways. Then again
# with A's limits.max_in_flight at 100 (docs/architecture.md, "Scheduling": what a cap buys).
echo
PUSHGW_BIN="$bin" bench/fairness.sh
echo
echo "(again, app A at limits.max_in_flight 100)"
PUSHGW_BIN="$bin" FAIR_A_MAX_IN_FLIGHT=100 FAIR_FLOOR=0 bench/fairness.sh

# The HTTP API (bench/ingest.sh): call events POSTed to pushgw run's ingest listener beside the
# same count XADDed by a Redis producer; events/s both ways, the API's accept p50/p99.
echo
PUSHGW_BIN="$bin" bench/ingest.sh

# Redis memory per call by kind (bench/redis-sizing.sh, release build), with the compact record's
# target.
echo
echo "== Redis memory per call, by what a call leaves in Redis"
PUSHGW_BIN="$bin" bench/redis-sizing.sh

# This checkout against the build before the hardening (bench/ab.sh): the cost issue's pay-back.
echo
REF=${AB_REF:-570948c} BENCH_ROUNDS=${AB_ROUNDS:-5} bench/ab.sh
