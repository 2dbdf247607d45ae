#!/usr/bin/env bash
# make bench-ab [REF=commit] [THIS=binary]: this checkout's `pushgw run --role router` against an older
# build of pushgw (REF, by default the build before the hardening, 570948c), alternated
# round by round in one run against the same nghttpd and the same redis-server, on the same
# pre-filled streams (EVENTS call events across 4 apps, each round from an empty Redis).
# Per build, medians over ROUNDS: events/s (from the results' entry ids, as bench/run.sh's
# binary line), the gateway's CPU per event (user + system from /proc, µs) and its peak RSS
# (VmHWM), redis-server's CPU per event over the same drain (what the build's lookups, claims
# and records cost the shared Redis, which bounds how fast a drain can go), and the ratio
# this/REF of each: what a change cost or paid back, with the machine's drift falling on both
# sides alike.
#
# Then the same under a GOAWAY storm (STORM_EVENTS, default 20,000; 0 leaves it out): the APNs
# simulator ends each connection with a GOAWAY after every 50 requests it judged, so the gateway
# reconnects and resends what the GOAWAY did not keep, over and over; per build, the median
# seconds from the first result to the last.
#
# REF is built once (release, its own worktree under .build/reference/) and kept there.
set -euo pipefail
cd "$(dirname "$0")/.."
REF=${REF:-570948c}
ROUNDS=${BENCH_ROUNDS:-5}
EVENTS=${BENCH_EVENTS:-50000}
STORM_EVENTS=${STORM_EVENTS:-20000}
scratch=pushgw-ab
. bench/common.sh

ref=$(git rev-parse --short=7 "$REF^{commit}")
refdir=$PWD/.build/reference/$ref
if [ ! -x "$refdir/pushgw" ]; then
  echo "building $ref (release) into $refdir ..."
  tree=$work/ref-tree
  git worktree add --detach "$tree" "$ref" >/dev/null
  (cd "$tree" && swift build -c release --product pushgw >/dev/null)
  mkdir -p "$refdir"
  cp "$(cd "$tree" && swift build -c release --show-bin-path)/pushgw" "$refdir/pushgw"
  git worktree remove --force "$tree"
fi
# THIS: another binary to hold against REF (a trial build, say) in this checkout's place; the
# storm's simulator stays this checkout's.
checkout=$(swift build -c release --show-bin-path)/pushgw
this=${THIS:-$checkout}
[ -x "$checkout" ] || { echo "no release build: run make release first" >&2; exit 1; }
[ -x "$this" ] || { echo "THIS=$this is not an executable" >&2; exit 1; }

start_nghttpd_and_redis
redis_pid=$(redis_server_pid "$rport")
write_router_config "$work/gw.json" "$rport" "$port" "$pki" "$(free_port)"

# One round of build $1: pre-fill, run the router until every event has its result, then
# "events/s cpu_us_per_event peak_rss_mb redis_cpu_us_per_event" (redis-server's CPU from the
# router's start to the last result: the lookups, claims and records the build asks of it).
round() {
  redis-cli -p "$rport" FLUSHALL >/dev/null
  prefill_calls "$rport" "$EVENTS" "$tokens"
  local redis_before
  redis_before=$(proc_cpu "$redis_pid")
  "$1" run --config "$work/gw.json" --role router --consumer bench-ab >/dev/null 2>&1 &
  local gw=$! rss=0 cpu redis_cpu
  pids+=("$gw")
  for _ in $(seq 1 1200); do
    [ "$(results_total "$rport")" -ge "$EVENTS" ] && break
    sleep 0.1
  done
  redis_cpu=$(python3 -c "print($(proc_cpu "$redis_pid") - $redis_before)")
  rss=$(awk '/VmHWM/ {print $2}' "/proc/$gw/status")
  cpu=$(proc_cpu "$gw")
  kill -TERM "$gw"; wait "$gw" || true
  forget_pid "$gw"
  echo "$(results_rate "$rport" "$EVENTS") $(python3 -c "print(f'{$cpu * 1e6 / $EVENTS:.1f} {$rss / 1024:.1f} {$redis_cpu * 1e6 / $EVENTS:.1f}')")"
}

echo "== A/B: pushgw run --role router, ${THIS:+$THIS in place of }this checkout ($(git rev-parse --short=7 HEAD)) against $ref, $EVENTS events across 4 apps, $ROUNDS alternating rounds"
a_rps=(); a_cpu=(); a_rss=(); a_red=(); b_rps=(); b_cpu=(); b_rss=(); b_red=()
for i in $(seq 1 "$ROUNDS"); do
  # Alternate which goes first, so neither always meets a warmer machine.
  if [ $((i % 2)) -eq 1 ]; then order=(this ref); else order=(ref this); fi
  for who in "${order[@]}"; do
    if [ "$who" = this ]; then read -r r c m d < <(round "$this"); a_rps+=("$r"); a_cpu+=("$c"); a_rss+=("$m"); a_red+=("$d")
    else read -r r c m d < <(round "$refdir/pushgw"); b_rps+=("$r"); b_cpu+=("$c"); b_rss+=("$m"); b_red+=("$d"); fi
  done
done
fmed() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-31s %12s %12s %8s\n' "" "this" "$ref" "this/ref"
for row in "events/s:a_rps:b_rps" "CPU per event, µs:a_cpu:b_cpu" "peak RSS, MB:a_rss:b_rss" \
           "redis-server CPU per event, µs:a_red:b_red"; do
  IFS=: read -r name av bv <<<"$row"
  declare -n A=$av B=$bv
  am=$(fmed "${A[@]}"); bm=$(fmed "${B[@]}")
  printf '%-31s %12s %12s %8s\n' "$name" "$am" "$bm" "$(python3 -c "print(f'{$am/$bm:.3f}')")"
  unset -n A B
done
echo "(each round, this: ${a_rps[*]} events/s, ${a_cpu[*]} µs, redis ${a_red[*]} µs; $ref: ${b_rps[*]} events/s, ${b_cpu[*]} µs, redis ${b_red[*]} µs)"

[ "$STORM_EVENTS" -gt 0 ] || exit 0
# The storm: this checkout's simulator (the same for both builds) with goaway_every 50.
start_simulator "$checkout" '"goaway_every": 50,'
write_router_config "$work/storm.json" "$rport" "$sport" "$pki" "$(free_port)"
storm_round() {
  redis-cli -p "$rport" FLUSHALL >/dev/null
  prefill_calls "$rport" "$STORM_EVENTS" "$tokens"
  "$1" run --config "$work/storm.json" --role router --consumer bench-ab >/dev/null 2>&1 &
  local gw=$!
  pids+=("$gw")
  for _ in $(seq 1 1200); do [ "$(results_total "$rport")" -ge "$STORM_EVENTS" ] && break; sleep 0.1; done
  kill -TERM "$gw"; wait "$gw" || true
  forget_pid "$gw"
  python3 -c "print(f'{($STORM_EVENTS - 1) / $(results_rate "$rport" "$STORM_EVENTS"):.2f}')"
}
echo "== the same under a GOAWAY storm: $STORM_EVENTS events, the APNs simulator sending a GOAWAY after every 50 requests a connection, $ROUNDS alternating rounds"
a_s=(); b_s=()
for i in $(seq 1 "$ROUNDS"); do
  if [ $((i % 2)) -eq 1 ]; then order=(this ref); else order=(ref this); fi
  for who in "${order[@]}"; do
    if [ "$who" = this ]; then a_s+=("$(storm_round "$this")"); else b_s+=("$(storm_round "$refdir/pushgw")"); fi
  done
done
am=$(fmed "${a_s[@]}"); bm=$(fmed "${b_s[@]}")
printf '%-31s %12s %12s %8s\n' "drain, s (first to last)" "$am" "$bm" "$(python3 -c "print(f'{$am/$bm:.3f}')")"
echo "(each round, this: ${a_s[*]} s; $ref: ${b_s[*]} s)"
