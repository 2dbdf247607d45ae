# make bench, Redis Cluster part (sourced by bench/run.sh, which defines bin, work, pki, port,
# EVENTS, ROUNDS, tokens, pids, free_port, wait_port and median): the end-to-end phase of
# `pushgw run --role router` again with its Redis a local cluster of three primaries
# (redis.cluster.seeds), the same events pre-filled across the same 4 apps (app0…app3, whose
# slots fall on all three primaries), and an idle gateway with 100 apps on the cluster, its
# commands counted with MONITOR on every node. On two cores the cluster's three redis-servers
# share them with pushgw: the figure says what the cluster client costs per event, not how a
# cluster scales.
cluster_ports=()
for _ in 1 2 3; do
  p=$(free_port); bus=$(free_port)
  mkdir -p "$work/cluster-$p"
  redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no --daemonize no --dir "$work/cluster-$p" \
    --logfile "$work/cluster-$p/redis.log" --cluster-enabled yes --cluster-config-file nodes.conf --cluster-port "$bus" &
  pids+=($!)
  cluster_ports+=("$p")
done
for p in "${cluster_ports[@]}"; do wait_port "$p"; done
redis-cli --cluster create $(printf '127.0.0.1:%s ' "${cluster_ports[@]}") --cluster-replicas 0 --cluster-yes >/dev/null
for _ in $(seq 1 200); do
  ok=0
  for p in "${cluster_ports[@]}"; do redis-cli -p "$p" CLUSTER INFO | grep -q 'cluster_state:ok' && ok=$((ok + 1)); done
  [ "$ok" -eq 3 ] && break
  sleep 0.1
done
seeds=$(printf '"127.0.0.1:%s",' "${cluster_ports[@]}"); seeds="[${seeds%,}]"
cluster_config() {  # file, apps
  python3 - "$1" "${cluster_ports[0]}" "$seeds" "$port" "$pki" "$2" <<'PY'
import json, sys
path, seed, seeds, port, pki, apps = sys.argv[1:]
app = {"bundle_id": "com.example.app", "credential": "k", "environment": "production", "ring_timeout_s": 600}
json.dump({"redis": {"url": f"redis://127.0.0.1:{seed}/0", "cluster": {"seeds": json.loads(seeds)}},
           "apns": {"production": {"endpoint": f"127.0.0.1:{port}"}, "sandbox": {"endpoint": f"127.0.0.1:{port}"},
                    "ca_file": f"{pki}/ca.pem", "connections": 2, "max_queued": 20000},
           "credentials": {"k": {"team_id": "TEAM123456", "key_id": "KEY1234567", "key_file": f"{pki}/AuthKey.p8"}},
           "apps": {f"app{i}": app for i in range(int(apps))}}, open(path, "w"))
PY
}
cluster_python() {  # one of: prefill, flush, rate
  python3 - "$1" "${cluster_ports[0]}" "$EVENTS" "$tokens" <<'PY'
import json, sys
from redis.cluster import RedisCluster, ClusterNode
what, seed, n, tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split(",")
r = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", seed)])
keys = [f"pushgw:{{app{i}}}:results" for i in range(4)]
if what == "flush":
    r.flushall(target_nodes=RedisCluster.PRIMARIES)
elif what == "prefill":
    p = r.pipeline()
    for i in range(n):
        ev = {"v": 1, "id": f"t-{i}", "type": "incoming_call", "voip_token": tokens[i % len(tokens)],
              "voip": {"caller": "+15551234567", "callerName": "Alice Johnson", "sessionId": "abc-123-def", "hasVideo": False}}
        p.xadd(f"pushgw:{{app{i % 4}}}:calls", {"event": json.dumps(ev, separators=(",", ":"))})
        if i % 5000 == 4999: p.execute()
    p.execute()
elif what == "count":
    print(sum(r.xlen(k) for k in keys))
else:
    assert sum(r.xlen(k) for k in keys) == n, "every event has its result"
    ms = lambda entry_id: int(entry_id.split(b"-")[0])
    first = min(ms(r.xrange(k, count=1)[0][0]) for k in keys)
    last = max(ms(r.xrevrange(k, count=1)[0][0]) for k in keys)
    print(int((n - 1) * 1000 / max(1, last - first)))
PY
}
cluster_config "$work/cluster-gw.json" 4
cluster_rps=()
for _ in $(seq 1 "$ROUNDS"); do
  cluster_python flush
  cluster_python prefill
  "$bin/pushgw" run --config "$work/cluster-gw.json" --role router --consumer bench-cluster >/dev/null 2>&1 &
  gw=$!
  pids+=("$gw")
  for _ in $(seq 1 1200); do [ "$(cluster_python count)" -ge "$EVENTS" ] && break; sleep 0.5; done
  kill -TERM "$gw"; wait "$gw" || true
  forget_pid "$gw"
  cluster_rps+=("$(cluster_python rate)")
done
printf '%-34s %12s   (single Redis, same run: %s; each round: %s)\n' "pushgw run on a 3-primary cluster" \
  "$(printf '%s\n' "${cluster_rps[@]}" | median)" "$run_median" "${cluster_rps[*]}"

# An idle gateway with 100 apps on the cluster: commands sent to every node in 35 s (one
# period of the per-app blocking reads), after its start-up.
cluster_config "$work/cluster-idle.json" 100
cluster_python flush
"$bin/pushgw" run --config "$work/cluster-idle.json" --role router,retry --consumer bench-cluster-idle --log-level error &
gw=$!
pids+=("$gw")
sleep 5
monitors=()
for p in "${cluster_ports[@]}"; do
  timeout 35 stdbuf -oL redis-cli -p "$p" monitor > "$work/cluster-idle-$p.txt" &
  monitors+=($!)
done
wait "${monitors[@]}" || true
kill -TERM "$gw"; wait "$gw" || true
forget_pid "$gw"
cat "$work"/cluster-idle-*.txt | grep -E '^[0-9]+\.[0-9]+ \[' | grep -v '\[0 lua\]' > "$work/cluster-idle.txt" || true
printf '%-34s %12s /s (one Redis: about 22; by command in 35 s: %s)\n' "idle pushgw run, 100 apps, cluster" \
  "$(python3 -c "print(f'{$(wc -l < "$work/cluster-idle.txt")/35:.1f}')")" \
  "$(awk '{print $4}' "$work/cluster-idle.txt" | tr -d '"' | sort | uniq -c | awk '{printf "%s%s %s", sep, $2, $1; sep=", "}')"
