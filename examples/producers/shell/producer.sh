#!/usr/bin/env bash
# A pushgw producer in shell with redis-cli (Debian's redis-tools) and coreutils only.
#
# Sends an incoming call, then its cancel (the caller hung up) and an invalid event, then a call
# that rings two devices and is answered on one (docs/protocol.md, *Devices*); reads each
# result by id (GET PREFIX:{APP}:result:ID), then through its own consumer group on the results
# stream, and reads the feedback stream. Prints one line per result and exits 0 when every
# event got its result within TIMEOUT_S seconds, else 1. The contract: docs/protocol.md.
#
# With INGEST_URL and INGEST_KEY (an API key of the app) it also sends a call and its cancel
# through the gateway's HTTP API with curl, and reads the call's result there, then a
# call ringing two devices answered on one (POST …/answer).
#
#   REDIS_URL=redis://127.0.0.1:6379/0 bash producer.sh
#   INGEST_URL=http://127.0.0.1:9480 INGEST_KEY=pgw_… REDIS_URL=… bash producer.sh
set -euo pipefail
url=${REDIS_URL:-redis://127.0.0.1:6379/0}
app=${PUSHGW_APP:-acme}
prefix=${PUSHGW_PREFIX:-pushgw}
voip_token=${VOIP_TOKEN:-a0a0a0a0a0a0a0a0}
alert_token=${ALERT_TOKEN:-b0b0b0b0b0b0b0b0}
timeout_s=${TIMEOUT_S:-10}
phone="{\"id\":\"bob-phone\",\"voip_token\":\"${PHONE_VOIP_TOKEN:-c0c0c0c0c0c0c0c0}\",\"alert_token\":\"${PHONE_ALERT_TOKEN:-c1c1c1c1c1c1c1c1}\"}"
ipad="{\"id\":\"bob-ipad\",\"voip_token\":\"${IPAD_VOIP_TOKEN:-c2c2c2c2c2c2c2c2}\",\"alert_token\":\"${IPAD_ALERT_TOKEN:-c3c3c3c3c3c3c3c3}\"}"
# With PIXEL_FCM_TOKEN set (an app with an fcm_credential), Bob's Android phone rings too.
devices="$phone,$ipad${PIXEL_FCM_TOKEN:+,{\"id\":\"bob-pixel\",\"fcm_token\":\"$PIXEL_FCM_TOKEN\"\}}"
deadline=$(( $(date +%s) + ${timeout_s%.*} ))

rc() { redis-cli -u "$url" --no-raw "$@" | sed 's/^"\(.*\)"$/\1/'; }   # one reply, quotes removed
raw() { redis-cli -u "$url" --raw "$@"; }                             # one value per line
key="$prefix:{$app}:"   # the app's keys: pushgw:{acme}:calls, …
group=producer-shell    # this producer's group on the results stream
field() { { grep -o "\"$1\":\"[^\"]*\"" || true; } | head -n 1 | cut -d '"' -f 4; }   # a string field's first value (a result's own fields come before its devices')

# Our own consumer group on the results stream, created before we write, at its end ($).
raw XGROUP CREATE "${key}results" "$group" '$' MKSTREAM >/dev/null 2>&1 || true

# The event's result, from its per-event key (no scan of the results stream).
result_by_id() {
  local found
  while [ "$(date +%s)" -le "$deadline" ]; do
    found=$(raw GET "${key}${2:-result:}$1")
    if [[ $found == '{'* ]]; then echo "$found"; return 0; fi   # absent, or in_flight:…: not finished yet
    sleep 0.05
  done
  return 1
}

call_id="call-sh-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"   # fresh: the idempotency key
deadline_ms=$(( $(date +%s%3N) + 30000 ))
entries=()   # calls entry ids (results carry them as `entry`)
entries+=("$(raw XADD "${key}calls" '*' event "{\"v\":1,\"id\":\"$call_id\",\"type\":\"incoming_call\",\"voip_token\":\"$voip_token\",\"alert_token\":\"$alert_token\",\"deadline\":$deadline_ms,\"voip\":{\"caller\":\"+15551234567\",\"callerName\":\"Alice\"}}")")
results=("$(result_by_id "$call_id" || true)")
# The caller hangs up: the cancel's own result is under cancel-result:ID.
entries+=("$(raw XADD "${key}calls" '*' event "{\"v\":1,\"id\":\"$call_id\",\"type\":\"call_cancelled\"}")")
entries+=("$(raw XADD "${key}calls" '*' event "{\"v\":1,\"id\":\"$call_id-bad\",\"type\":\"incoming_call\",\"voip_token\":\"not-hex\"}")")
results+=("$(result_by_id "$call_id" cancel-result: || true)" "$(result_by_id "$call_id-bad" || true)")
# A call that rings both of Bob's devices; he answers on the phone a second later, and the
# iPad stops ringing (one background push). The answer's own result is under cancel-result:ID.
multi_id="$call_id-multi"
entries+=("$(raw XADD "${key}calls" '*' event "{\"v\":1,\"id\":\"$multi_id\",\"type\":\"incoming_call\",\"devices\":[$devices],\"deadline\":$(( $(date +%s%3N) + 30000 )),\"voip\":{\"caller\":\"+15551234567\",\"callerName\":\"Alice\"}}")")
sleep 1
entries+=("$(raw XADD "${key}calls" '*' event "{\"v\":1,\"id\":\"$multi_id\",\"type\":\"call_answered\",\"device\":\"bob-phone\"}")")
results+=("$(result_by_id "$multi_id" || true)" "$(result_by_id "$multi_id" cancel-result: || true)")

ok=yes
names=("$call_id" "cancel:$call_id" "$call_id-bad" "$multi_id" "answer:$multi_id")
for i in 0 1 2 3 4; do
  res=${results[$i]}
  if [ -z "$res" ]; then echo "result ${names[$i]} none: no result within $timeout_s s"; ok=no; continue; fi
  detail=$(field cause <<<"$res"); [ -n "$detail" ] || detail=$(field reason <<<"$res")
  [ -n "$detail" ] || detail=$(field first_outcome <<<"$res"); [ -n "$detail" ] || detail=$(field ended <<<"$res")
  [ -n "$detail" ] || detail=-
  echo "result $(field id <<<"$res") $(field type <<<"$res") $(field outcome <<<"$res") $detail"
done

# The same results through our consumer group: each entry names the calls entry it answers.
# redis-cli --raw prints the reply one value per line: stream, then per entry its id, the
# field name `result` and the result JSON.
seen=0
while [ "$seen" -lt 5 ] && [ "$(date +%s)" -le "$deadline" ]; do
  id=""
  while IFS= read -r line; do
    case "$line" in
      [0-9]*-[0-9]*) id=$line ;;
      '{"outcome"'*)
        entry=$(field entry <<<"$line")
        for e in "${entries[@]}"; do [ "$e" = "$entry" ] && seen=$((seen + 1)); done
        raw XACK "${key}results" "$group" "$id" >/dev/null ;;
    esac
  done < <(raw XREADGROUP GROUP "$group" worker-1 COUNT 100 BLOCK 500 STREAMS "${key}results" '>')
done
echo "group $group $seen results"
[ "$seen" -eq 5 ] || ok=no

# The same through the HTTP API (docs/protocol.md, "The HTTP API"), when the gateway has one:
# a call that waits for its result, its cancel, and the result read by id, with curl.
if [ -n "${INGEST_URL:-}" ] && [ -n "${INGEST_KEY:-}" ]; then
  api() { curl -sS -H "Authorization: Bearer $INGEST_KEY" -H 'Content-Type: application/json' "$@"; }
  api_id="call-sh-api-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
  api_token=${API_VOIP_TOKEN:-a1a1a1a1a1a1a1a1}
  answer=$(api --data-binary "{\"v\":1,\"id\":\"$api_id\",\"type\":\"incoming_call\",\"voip_token\":\"$api_token\",\"voip\":{\"caller\":\"+15551234567\",\"callerName\":\"Alice\"}}" \
    "$INGEST_URL/v1/apps/$app/calls?wait=5s")
  echo "api call $api_id $(field outcome <<<"$answer")"
  answer=$(api -X POST "$INGEST_URL/v1/apps/$app/calls/$api_id/cancel?wait=5s")
  echo "api cancel $api_id $(field outcome <<<"$answer") $(field cancelled_after <<<"$answer")"
  answer=$(api "$INGEST_URL/v1/apps/$app/calls/$api_id")
  echo "api result $api_id $(field outcome <<<"$answer")"
  [ "$(field status <<<"$answer")" = done ] || ok=no
  # A call ringing two devices through the API; Bob answers on the phone and the iPad stops.
  multi_api_id="$api_id-multi"
  api_devices="[{\"id\":\"bob-phone\",\"voip_token\":\"${API_PHONE_TOKEN:-b0b0b0b0b0b0b0b0}\"},{\"id\":\"bob-ipad\",\"voip_token\":\"${API_IPAD_TOKEN:-b2b2b2b2b2b2b2b2}\"}]"
  api --data-binary "{\"v\":1,\"id\":\"$multi_api_id\",\"type\":\"incoming_call\",\"devices\":$api_devices,\"deadline\":$(( $(date +%s%3N) + 30000 )),\"voip\":{\"caller\":\"+15551234567\",\"callerName\":\"Alice\"}}" \
    "$INGEST_URL/v1/apps/$app/calls" >/dev/null
  sleep 1
  answer=$(api --data-binary '{"device":"bob-phone"}' "$INGEST_URL/v1/apps/$app/calls/$multi_api_id/answer?wait=5s")
  echo "api answer $multi_api_id $(field outcome <<<"$answer")"
  [ "$(field outcome <<<"$answer")" = answered ] || ok=no
  answer=$(api "$INGEST_URL/v1/apps/$app/calls/$multi_api_id?wait=5s")
  ended=$(field ended <<<"$answer"); [ -n "$ended" ] || ended=-
  echo "api result $multi_api_id $(field outcome <<<"$answer") $ended"
fi

# Feedback entries: id, then field/value pairs (token, channel, reason, timestamp).
raw XREVRANGE "${key}feedback" + - COUNT 100 | paste - - - - - - - - - | while IFS=$'\t' read -r _ _ token _ channel _ reason _ timestamp; do
  if [ "$token" = "$voip_token" ] || [ "$token" = "$alert_token" ]; then echo "feedback $channel $token $reason $timestamp"; fi
done
[ "$ok" = yes ]
