#!/usr/bin/env bash
# make demo: pushgw end to end on this machine only — a private redis-server and the APNs
# simulator on free loopback ports, the gateway (`pushgw run`) with two apps, and call events
# written by a producer that show each path. Stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${PUSHGW_BIN_DIR:-$(swift build -c release --show-bin-path)}
secrets=config/demo-secrets
work=$(mktemp -d "${TMPDIR:-/tmp}/pushgw-demo.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
# Servers start through `setpriv --pdeathsig TERM`: the kernel stops them if this script dies
# without its cleanup (SIGKILL).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_port() { for _ in $(seq 1 200); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done; echo "nothing on port $1" >&2; exit 1; }

# A throwaway PKI: the simulator's certificate, the acme app's .p8 key, beta's client certificate.
scripts/make-pki.sh "$secrets" com.beta.talk >/dev/null

redis_port=$(free_port)
setpriv --pdeathsig TERM -- redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --logfile "$work/redis.log" &
pids+=($!)
wait_port "$redis_port"

apns_port=$(free_port)
cat > "$work/simulator.json" <<JSON
{ "cert_file": "$PWD/$secrets/server.pem", "key_file": "$PWD/$secrets/server.key",
  "client_ca_file": "$PWD/$secrets/ca.pem",
  "token_keys": { "DEMOKEY001": "$PWD/$secrets/AuthKey.pub.pem" }, "team_id": "DEMOTEAM01",
  "bundle_ids": ["com.acme.phone", "com.beta.talk"], "sandbox": true,
  "fcm_service_accounts": { "pushgw-demo@acme-phone.iam.gserviceaccount.com": "$PWD/$secrets/fcm-service-account.pub.pem" },
  "scenarios": { "dead0000dead0000": "unregistered", "f1a7f1a7f1a7f1a7": "flaky:2" },
  "log_file": "$work/apns-requests.jsonl" }
JSON
setpriv --pdeathsig TERM -- "$bin/pushgw" simulator --config "$work/simulator.json" --port "$apns_port" > "$work/simulator.out" &
pids+=($!)
wait_port "$apns_port"

# The acme app's Google service account (its Android phones): the PKI's RSA key, exchanging
# access tokens at the simulator's token endpoint.
python3 - "$secrets" "$apns_port" <<'PY'
import json, os, sys
secrets, port = sys.argv[1], sys.argv[2]
path = os.path.join(secrets, "firebase-service-account.json")
with open(path, "w") as f:
    json.dump({"type": "service_account", "project_id": "acme-phone", "private_key_id": "demo-key-1",
               "private_key": open(os.path.join(secrets, "fcm-service-account.key")).read(),
               "client_email": "pushgw-demo@acme-phone.iam.gserviceaccount.com",
               "token_uri": f"https://127.0.0.1:{port}/token"}, f)
os.chmod(path, 0o600)
PY

export PUSHGW_REDIS_URL=redis://127.0.0.1:$redis_port/0
export PUSHGW_FCM_ENDPOINT=127.0.0.1:$apns_port
export PUSHGW_APNS_PRODUCTION_ENDPOINT=127.0.0.1:$apns_port PUSHGW_APNS_SANDBOX_ENDPOINT=127.0.0.1:$apns_port
echo "redis-server on 127.0.0.1:$redis_port, APNs simulator on 127.0.0.1:$apns_port"
"$bin/pushgw" config check --config config/demo.json
setpriv --pdeathsig TERM -- "$bin/pushgw" run --config config/demo.json --log-level warn > "$work/gateway.log" &
gateway=$!
pids+=($gateway)
sleep 0.5

echo
echo "Producer: one call event per path (Python, redis package), then each call's result:"
python3 - "$redis_port" <<'PY'
import json, sys, time, redis
r = redis.Redis(port=int(sys.argv[1]), decode_responses=True)
now = int(time.time() * 1000)
voip = {"caller": "+15551234567", "callerName": "Alice Johnson"}
calls = [
    ("acme", "VoIP delivered", {"id": "call-1", "voip_token": "a0a0a0a0a0a0a0a0", "alert_token": "b0b0b0b0b0b0b0b0"}),
    ("acme", "VoIP token gone -> alert", {"id": "call-2", "voip_token": "dead0000dead0000", "alert_token": "b0b0b0b0b0b0b0b0"}),
    ("acme", "flaky APNs -> retried -> delivered", {"id": "call-3", "voip_token": "f1a7f1a7f1a7f1a7"}),
    ("acme", "deadline already passed -> missed call", {"id": "call-4", "voip_token": "a0a0a0a0a0a0a0a0",
                                                       "alert_token": "b0b0b0b0b0b0b0b0", "deadline": now - 5000}),
    ("beta", "certificate auth, VoIP delivered", {"id": "call-5", "voip_token": "a1a1a1a1a1a1a1a1"}),
    ("acme", "Android phone rung through FCM", {"id": "call-7", "fcm_token": "demo-pixel:APA91bH-demo"}),
]
cursor = {}
for app in ("acme", "beta"):
    last = r.xrevrange(f"pushgw:{{{app}}}:results", count=1)
    cursor[app] = last[0][0] if last else "0-0"
for app, _, fields in calls:
    event = {"v": 1, "type": "incoming_call", "voip": voip, **fields}
    r.xadd(f"pushgw:{{{app}}}:calls", {"event": json.dumps(event)})
r.xadd("pushgw:{acme}:calls", {"event": '{"v":1,"id":"call-6","type":"incoming_call","voip_token":"not-hex"}'})
labels = {f["id"]: label for _, label, f in calls}
labels["call-6"] = "invalid event -> dead letter"
seen = {}
deadline = time.time() + 15
while len(seen) < len(labels) and time.time() < deadline:
    for app in ("acme", "beta"):
        for _, entries in r.xread({f"pushgw:{{{app}}}:results": cursor[app]}, block=200) or []:
            for entry_id, f in entries:
                cursor[app] = entry_id
                res = json.loads(f["result"])
                seen[res.get("id")] = res
for call_id, label in labels.items():
    res = seen.get(call_id)
    if res is None:
        print(f"  {call_id}  {label:42s} NO RESULT"); continue
    detail = res.get("cause") or res.get("reason") or ""
    tries = " ".join(f'{a["provider"] + "/" if "provider" in a else ""}{a["channel"]}:{a.get("status", a.get("error"))}'
                     for a in res["attempts"])
    print(f"  {call_id}  {label:42s} {res['outcome']:16s} {detail:20s} [{tries}]")
print()
print("Dead letters (pushgw:{acme}:dead):")
for entry_id, f in r.xrange("pushgw:{acme}:dead"):
    print(f"  {entry_id}  {f['reason']}")
print()
print("Feedback (pushgw:{acme}:feedback):")
for entry_id, f in r.xrange("pushgw:{acme}:feedback"):
    print(f"  {f['channel']} token {f['token']}: {f['reason']} at {f['timestamp']}")
PY

kill -TERM "$gateway"; wait "$gateway" 2>/dev/null || true
echo
echo "The gateway drained and stopped on SIGTERM; everything the demo started is stopped on exit."
