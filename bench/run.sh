#!/usr/bin/env bash
# make bench: pushgw's figures beside reference tools run in the same invocation, against
# the same servers on loopback, alternating runs and quoting medians (a shared machine
# moves absolute figures by ±30 %; the ratio is what to read).
#
#   APNs client: pushgw-bench apns vs h2load against one nghttpd in static-file mode,
#   1 and 4 connections × 100 streams; ratio pushgw/h2load (target ≥ 1.0) and pushgw's
#   peak RSS (target ≤ 30 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS=${BENCH_REQUESTS:-200000}
ROUNDS=${BENCH_ROUNDS:-3}
bin=$(swift build -c release --show-bin-path)
work=$(mktemp -d /tmp/pushgw-bench.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_port() { for _ in $(seq 1 200); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done; echo "nothing on port $1" >&2; exit 1; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }

scripts/make-pki.sh "$work/pki" com.example.app >/dev/null
pki=$work/pki
token=$(printf 'ab%.0s' $(seq 1 32))
mkdir -p "$work/htdocs/3/device"
echo '{}' > "$work/htdocs/3/device/$token"
python3 -c "print('{\"caller\":\"+15551234567\",\"callerName\":\"Alice Johnson\",\"pad\":\"'+'x'*250+'\"}', end='')" > "$work/body.json"

port=$(free_port)
nghttpd -a 127.0.0.1 -d "$work/htdocs" "$port" "$pki/server.key" "$pki/server.pem" >/dev/null 2>&1 &
pids+=($!)
wait_port "$port"
jwt=$("$bin/pushgw-bench" jwt --key "$pki/AuthKey.p8")

echo "== APNs client: $REQUESTS POSTs (VoIP, 300-byte body, JWT) to nghttpd static-file mode on 127.0.0.1, TLS, ${ROUNDS} alternating rounds, medians"
printf '%-22s %14s %14s %8s %14s\n' "connections x streams" "h2load req/s" "pushgw req/s" "ratio" "pushgw peak RSS"
for c in 1 4; do
  h=(); p=(); rss=()
  for _ in $(seq 1 "$ROUNDS"); do
    h+=("$(h2load -n "$REQUESTS" -c "$c" -m 100 -d "$work/body.json" \
        -H 'apns-push-type: voip' -H 'apns-topic: com.example.app.voip' -H 'apns-priority: 10' \
        -H 'apns-expiration: 0' -H "authorization: bearer $jwt" \
        "https://127.0.0.1:$port/3/device/$token" | awk '/^finished in/ {print int($4)}')")
    out=$("$bin/pushgw-bench" apns --port "$port" --ca "$pki/ca.pem" --key "$pki/AuthKey.p8" --token "$token" \
          --connections "$c" --streams 100 --requests "$REQUESTS")
    p+=("$(echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["ok"]==d["requests"], d; print(d["rps"])')")
    rss+=("$(echo "$out" | python3 -c 'import json,sys; print(json.load(sys.stdin)["peak_rss_mb"])')")
  done
  hm=$(printf '%s\n' "${h[@]}" | median); pm=$(printf '%s\n' "${p[@]}" | median)
  peak=$(printf '%s\n' "${rss[@]}" | sort -n | tail -1)
  printf '%-22s %14s %14s %8s %12s MB\n' "$c x 100" "$hm" "$pm" "$(python3 -c "print(f'{$pm/$hm:.2f}')")" "$peak"
done
echo "(targets: ratio >= 1.0, peak RSS <= 30 MB; each h2load and pushgw run: ${h[*]} / ${p[*]} for the last row)"
