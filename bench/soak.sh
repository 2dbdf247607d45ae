#!/usr/bin/env bash
# make soak (not in CI): `pushgw run` (release build) under a steady SOAK_RATE events/s (default
# 1,000) for SOAK_SECONDS (default 600) with mixed outcomes, against a private redis-server and
# the APNs simulator on loopback. Every minute it prints pushgw's RSS and open file descriptors,
# Redis' memory per event written so far, and the XADD -> answer p50/p99 of the calls finished
# that minute (bench/soak.py); at the end it checks that every event has exactly one result.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(swift build -c release --show-bin-path)
scratch=pushgw-soak
. bench/common.sh

scripts/make-pki.sh "$work/pki" com.example.app >/dev/null
rport=$(free_port); sport=$(free_port); aport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --daemonize no --logfile "$work/redis.log" &
redis_pid=$!; pids+=("$redis_pid")
# Token classes of bench/soak.py: 0a… answered 200, 0b… 410 Unregistered (then known invalid:
# the alert goes at once), 0c… 503 every time (VoIP retried, then the alert).
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
scenarios = {"0b" * 16: "unregistered", "0c" * 16: "unavailable"}
json.dump({"cert_file": f"{work}/pki/server.pem", "key_file": f"{work}/pki/server.key",
           "token_keys": {"KEY1234567": f"{work}/pki/AuthKey.pub.pem"}, "team_id": "TEAM123456",
           "scenarios": scenarios}, open(f"{work}/sim.json", "w"))
PY
"$bin/pushgw" simulator --config "$work/sim.json" --port "$sport" >/dev/null &
pids+=($!)
wait_port "$sport"
python3 - "$work" "$rport" "$sport" "$aport" <<'PY'
import json, sys
work, rport, sport, aport = sys.argv[1:]
json.dump({"redis": {"url": f"redis://127.0.0.1:{rport}/0"}, "admin": {"listen": f"127.0.0.1:{aport}"},
           "apns": {"production": {"endpoint": f"127.0.0.1:{sport}"}, "sandbox": {"endpoint": f"127.0.0.1:{sport}"},
                    "ca_file": f"{work}/pki/ca.pem"},
           "credentials": {"k": {"team_id": "TEAM123456", "key_id": "KEY1234567", "key_file": f"{work}/pki/AuthKey.p8"}},
           "apps": {"acme": {"bundle_id": "com.example.app", "credential": "k", "environment": "production",
                             "retry": {"voip": {"max_attempts": 3, "base_ms": 100, "cap_ms": 500}}}}},
          open(f"{work}/gw.json", "w"))
PY
"$bin/pushgw" run --config "$work/gw.json" --consumer soak > "$work/gw.log" 2>&1 &
gw_pid=$!; pids+=("$gw_pid")
wait_port "$aport"
echo "soak: ${SOAK_SECONDS:-600} s at ${SOAK_RATE:-1000} events/s; pushgw run pid $gw_pid, redis-server on $rport, simulator on $sport"
python3 bench/soak.py --redis-port "$rport" --gateway-pid "$gw_pid" --rate "${SOAK_RATE:-1000}" --seconds "${SOAK_SECONDS:-600}"
echo "gateway log: $(wc -l < "$work/gw.log") lines, $(grep -c '"level":"warn"\|"level":"error"' "$work/gw.log" || true) warnings and errors"
