#!/usr/bin/env python3
"""A pushgw producer in Python with Debian's python3-redis (the `redis` package of PyPI).

Sends an incoming call, then its cancel (the caller hung up) and an invalid event, then a call
that rings two devices and is answered on one (docs/protocol.md, *Devices*); reads each
result by id (GET PREFIX:{APP}:result:ID), then through its own consumer group on the results
stream, and reads the feedback stream. Prints one line per result and exits 0 when every
event got its result within TIMEOUT_S seconds, else 1. The contract: docs/protocol.md.

With INGEST_URL and INGEST_KEY (an API key of the app) it also sends a call and its cancel
through the gateway's HTTP API and reads the call's result there, then a
call ringing two devices answered on one (POST …/answer).

    REDIS_URL=redis://127.0.0.1:6379/0 PUSHGW_APP=acme python3 producer.py
"""
import json
import os
import sys
import time
import urllib.error
import urllib.request
import uuid

import redis

url = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
app = os.environ.get("PUSHGW_APP", "acme")
prefix = os.environ.get("PUSHGW_PREFIX", "pushgw")
voip_token = os.environ.get("VOIP_TOKEN", "a0a0a0a0a0a0a0a0")
alert_token = os.environ.get("ALERT_TOKEN", "b0b0b0b0b0b0b0b0")
timeout_s = float(os.environ.get("TIMEOUT_S", "10"))
phone = {"id": "bob-phone", "voip_token": os.environ.get("PHONE_VOIP_TOKEN", "c0c0c0c0c0c0c0c0"),
         "alert_token": os.environ.get("PHONE_ALERT_TOKEN", "c1c1c1c1c1c1c1c1")}
ipad = {"id": "bob-ipad", "voip_token": os.environ.get("IPAD_VOIP_TOKEN", "c2c2c2c2c2c2c2c2"),
        "alert_token": os.environ.get("IPAD_ALERT_TOKEN", "c3c3c3c3c3c3c3c3")}
# With PIXEL_FCM_TOKEN set (an app with an fcm_credential), Bob's Android phone rings too.
devices = [phone, ipad] + ([{"id": "bob-pixel", "fcm_token": os.environ["PIXEL_FCM_TOKEN"]}]
                           if os.environ.get("PIXEL_FCM_TOKEN") else [])

r = redis.Redis.from_url(url, decode_responses=True)
key = f"{prefix}:{{{app}}}:"                      # the app's keys: pushgw:{acme}:calls, …
group = "producer-python"                          # this producer's group on the results stream

# Our own consumer group on the results stream, created before we write, at its end ($).
try:
    r.xgroup_create(key + "results", group, id="$", mkstream=True)
except redis.ResponseError as e:
    if "BUSYGROUP" not in str(e):
        raise

def send(event):
    """XADD one event; returns the calls entry id (results carry it as `entry`)."""
    return r.xadd(key + "calls", {"event": json.dumps(event)})

def result_by_id(event_id, deadline, kind="result:"):
    """The event's result, from its per-event key (no scan of the results stream)."""
    while time.monotonic() < deadline:
        found = r.get(key + kind + event_id)
        if found and found.startswith("{"):           # absent, or in_flight:…: not finished yet
            return json.loads(found)
        time.sleep(0.05)
    return None

deadline = time.monotonic() + timeout_s
call_id = f"call-py-{uuid.uuid4().hex[:12]}"      # a fresh id per call: it is the idempotency key
entries = {}
entries[send({"v": 1, "id": call_id, "type": "incoming_call",
              "voip_token": voip_token, "alert_token": alert_token,
              "deadline": int(time.time() * 1000) + 30_000,
              "voip": {"caller": "+15551234567", "callerName": "Alice"}})] = call_id
results = {call_id: result_by_id(call_id, deadline)}
# The caller hangs up: the cancel's own result is under cancel-result:ID.
entries[send({"v": 1, "id": call_id, "type": "call_cancelled"})] = "cancel:" + call_id
bad_id = call_id + "-bad"
entries[send({"v": 1, "id": bad_id, "type": "incoming_call", "voip_token": "not-hex"})] = bad_id
results["cancel:" + call_id] = result_by_id(call_id, deadline, "cancel-result:")
results[bad_id] = result_by_id(bad_id, deadline)
# A call that rings both of Bob's devices; he answers on the phone a second later, and the
# iPad stops ringing (one background push). The answer's own result is under cancel-result:ID.
multi_id = call_id + "-multi"
entries[send({"v": 1, "id": multi_id, "type": "incoming_call", "devices": devices,
              "deadline": int(time.time() * 1000) + 30_000,
              "voip": {"caller": "+15551234567", "callerName": "Alice"}})] = multi_id
time.sleep(1)
entries[send({"v": 1, "id": multi_id, "type": "call_answered", "device": "bob-phone"})] = "answer:" + multi_id
results[multi_id] = result_by_id(multi_id, deadline)
results["answer:" + multi_id] = result_by_id(multi_id, deadline, "cancel-result:")

ok = True
for name, res in results.items():
    if res is None:
        print(f"result {name} none: no result within {timeout_s} s")
        ok = False
        continue
    detail = res.get("cause") or res.get("reason") or res.get("first_outcome") or res.get("ended") or "-"
    print(f"result {res.get('id')} {res.get('type')} {res['outcome']} {detail}")

# The same results through our consumer group: each entry names the calls entry it answers.
seen = 0
while seen < len(entries) and time.monotonic() < deadline:
    for _, items in r.xreadgroup(group, "worker-1", {key + "results": ">"}, count=100, block=500) or []:
        for entry_id, fields in items:
            if json.loads(fields["result"]).get("entry") in entries:
                seen += 1
            r.xack(key + "results", group, entry_id)
print(f"group {group} {seen} results")
ok = ok and seen == len(entries)

# The same through the HTTP API (docs/protocol.md, "The HTTP API"), when the gateway has one:
# a call that waits for its result, its cancel, and the result read by id (urllib: stdlib).
ingest_url, ingest_key = os.environ.get("INGEST_URL"), os.environ.get("INGEST_KEY")
if ingest_url and ingest_key:
    def api(method, path, event=None):
        body = json.dumps(event).encode() if event is not None else None
        req = urllib.request.Request(f"{ingest_url}/v1/apps/{app}/calls{path}", data=body, method=method,
                                     headers={"Authorization": f"Bearer {ingest_key}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=15) as answer:
                return json.load(answer)
        except urllib.error.HTTPError as refused:          # 4xx/5xx: {"error": code, "message": …}
            return json.load(refused)
    api_id = f"call-py-api-{uuid.uuid4().hex[:12]}"
    done = api("POST", "?wait=5s", {"v": 1, "id": api_id, "type": "incoming_call",
                                    "voip_token": os.environ.get("API_VOIP_TOKEN", "a1a1a1a1a1a1a1a1"),
                                    "voip": {"caller": "+15551234567", "callerName": "Alice"}})
    print(f"api call {api_id} {done.get('result', {}).get('outcome')}")
    cancelled = api("POST", f"/{api_id}/cancel?wait=5s").get("result", {})
    print(f"api cancel {api_id} {cancelled.get('outcome')} {cancelled.get('cancelled_after', '-')}")
    read = api("GET", f"/{api_id}")
    print(f"api result {api_id} {read.get('result', {}).get('outcome')}")
    ok = ok and read.get("status") == "done"
    # A call ringing two devices through the API; Bob answers on the phone and the iPad stops.
    multi_id = api_id + "-multi"
    devices = [{"id": "bob-phone", "voip_token": os.environ.get("API_PHONE_TOKEN", "b0b0b0b0b0b0b0b0")},
               {"id": "bob-ipad", "voip_token": os.environ.get("API_IPAD_TOKEN", "b2b2b2b2b2b2b2b2")}]
    api("POST", "", {"v": 1, "id": multi_id, "type": "incoming_call", "devices": devices,
                     "deadline": int(time.time() * 1000) + 30000, "voip": {"caller": "+15551234567", "callerName": "Alice"}})
    time.sleep(1)
    answered = api("POST", f"/{multi_id}/answer?wait=5s", {"device": "bob-phone"}).get("result", {})
    print(f"api answer {multi_id} {answered.get('outcome')}")
    multi = api("GET", f"/{multi_id}?wait=5s").get("result", {})
    print(f"api result {multi_id} {multi.get('outcome')} {multi.get('ended', '-')}")
    ok = ok and answered.get("outcome") == "answered"

for _, f in r.xrevrange(key + "feedback", count=100):
    if f["token"] in (voip_token, alert_token):
        print(f"feedback {f['channel']} {f['token']} {f['reason']} {f['timestamp']}")
sys.exit(0 if ok else 1)
