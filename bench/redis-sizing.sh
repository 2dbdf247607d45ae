#!/usr/bin/env bash
# Redis memory per call by what it leaves in Redis (docs/operations.md, "Redis sizing"): a
# private redis-server (noeviction, no persistence), the APNs simulator and `pushgw run` on
# loopback, and bench/redis_sizing.py, which runs SIZING_CALLS (default 5,000) calls of each kind
# and prints bytes per call and per key; a minute or two. Not part of `make test`; the last phase
# but one of `make bench`. The gateway binary is the debug build unless BUILD=release or
# PUSHGW_BIN names a build's directory (Redis' figures do not depend on it; make bench passes its
# release build).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${PUSHGW_BIN:-$(swift build ${BUILD:+-c "$BUILD"} --show-bin-path)}
[ -x "$bin/pushgw" ] || swift build ${BUILD:+-c "$BUILD"} --product pushgw
work=$(mktemp -d /tmp/pushgw-sizing.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_port() { for _ in $(seq 1 200); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done; echo "nothing on port $1" >&2; exit 1; }

scripts/make-pki.sh "$work/pki" com.example.app >/dev/null
rport=$(free_port); sport=$(free_port); aport=$(free_port)
redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --daemonize no --logfile "$work/redis.log" &
pids+=($!)
# Unlisted tokens answer 410 Unregistered (the `gone` kind has one per call); 0a… is accepted,
# 0c… answered 503 (the `waiting` kind), 0d… (alerts) accepted.
/usr/bin/python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
json.dump({"cert_file": f"{work}/pki/server.pem", "key_file": f"{work}/pki/server.key",
           "token_keys": {"KEY1234567": f"{work}/pki/AuthKey.pub.pem"}, "team_id": "TEAM123456",
           "default_scenario": "unregistered",
           "scenarios": {"0a" * 16: "ok", "0c" * 16: "unavailable", "0d" * 16: "ok"}}, open(f"{work}/sim.json", "w"))
PY
"$bin/pushgw" simulator --config "$work/sim.json" --port "$sport" >/dev/null &
pids+=($!)
wait_port "$sport"
/usr/bin/python3 - "$work" "$rport" "$sport" "$aport" <<'PY'
import json, sys
work, rport, sport, aport = sys.argv[1:]
app = {"bundle_id": "com.example.app", "credential": "k", "environment": "production", "ring_timeout_s": 1200,
       "retry": {"voip": {"max_attempts": 3, "base_ms": 600000, "cap_ms": 600000}}}
json.dump({"redis": {"url": f"redis://127.0.0.1:{rport}/0"}, "admin": {"listen": f"127.0.0.1:{aport}"},
           "apns": {"production": {"endpoint": f"127.0.0.1:{sport}"}, "sandbox": {"endpoint": f"127.0.0.1:{sport}"},
                    "ca_file": f"{work}/pki/ca.pem"},
           "credentials": {"k": {"team_id": "TEAM123456", "key_id": "KEY1234567", "key_file": f"{work}/pki/AuthKey.p8"}},
           # size-window keeps the compact record (retention.result_detail_s: off by default), to
           # measure it; the others have the defaults (the whole result for the window).
           "apps": {**{name: app for name in ["size-ok", "size-gone", "size-cancel", "size-dead", "size-wait"]},
                    "size-window": {**app, "retention": {"result_detail_s": 900}}}},
          open(f"{work}/gw.json", "w"))
PY
"$bin/pushgw" run --config "$work/gw.json" --consumer sizing > "$work/gw.log" 2>&1 &
pids+=($!)
wait_port "$aport"
/usr/bin/python3 bench/redis_sizing.py --redis-port "$rport" --calls "${SIZING_CALLS:-5000}"
