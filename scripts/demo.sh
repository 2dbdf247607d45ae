#!/usr/bin/env bash
# make demo: runs pushgw end to end on this machine only: a throwaway PKI, the APNs
# simulator on a free loopback port, and pushes for two apps (token and certificate auth)
# that show Apple's answers. Stops everything it started.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(swift build -c release --show-bin-path)
secrets=config/demo-secrets
work=$(mktemp -d /tmp/pushgw-demo.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

scripts/make-pki.sh "$secrets" com.beta.talk >/dev/null
apns_port=$(free_port)
cat > "$work/simulator.json" <<JSON
{ "cert_file": "$PWD/$secrets/server.pem", "key_file": "$PWD/$secrets/server.key",
  "client_ca_file": "$PWD/$secrets/ca.pem",
  "token_keys": { "DEMOKEY001": "$PWD/$secrets/AuthKey.pub.pem" }, "team_id": "DEMOTEAM01",
  "bundle_ids": ["com.acme.phone", "com.beta.talk"], "sandbox": true,
  "scenarios": { "a0a0a0a0a0a0a0a0": "ok", "dead0000dead0000": "unregistered", "f1a7f1a7f1a7f1a7": "flaky:2" },
  "log_file": "$work/apns-requests.jsonl" }
JSON
"$bin/pushgw" simulator --config "$work/simulator.json" --port "$apns_port" > "$work/simulator.out" &
pids+=($!)
for _ in $(seq 1 100); do grep -q listening "$work/simulator.out" 2>/dev/null && break; sleep 0.05; done
echo "APNs simulator: $(cat "$work/simulator.out")"

export PUSHGW_APNS_PRODUCTION_ENDPOINT=127.0.0.1:$apns_port PUSHGW_APNS_SANDBOX_ENDPOINT=127.0.0.1:$apns_port
"$bin/pushgw" config check --config config/demo.json
push() {
  local label=$1; shift
  printf '%-44s ' "$label"
  "$bin/pushgw" push --config config/demo.json --json "$@" || true
}
push "acme (token auth), VoIP push, token ok:" --app acme --token a0a0a0a0a0a0a0a0 --payload '{"caller":"+15551234567","callerName":"Alice"}'
push "acme, VoIP push, token unregistered:" --app acme --token dead0000dead0000
push "acme, alert push (missed call):" --app acme --token a0a0a0a0a0a0a0a0 --type alert --payload '{"aps":{"alert":{"title":"Missed call","body":"Alice tried to call you"}}}'
push "beta (certificate auth), VoIP push:" --app beta --token a0a0a0a0a0a0a0a0
push "acme, flaky token (1st try):" --app acme --token f1a7f1a7f1a7f1a7
push "acme, flaky token (2nd try):" --app acme --token f1a7f1a7f1a7f1a7
push "acme, flaky token (3rd try):" --app acme --token f1a7f1a7f1a7f1a7
kill "${pids[0]}"; wait "${pids[0]}" 2>/dev/null || true
echo "the simulator logged $(wc -l < "$work/apns-requests.jsonl") requests (JSON lines)"
