#!/usr/bin/env python3
"""A pushgw producer: sends one incoming call to an app's stream and waits for its result.

    python3 producer.py --app acme --voip-token HEX [--alert-token HEX] [--redis-url URL]

Prints the result JSON (one line) and exits 0 when the call reached an outcome, 1 when no
result came within --timeout seconds. Needs the `redis` package (pip install redis).
"""
import argparse
import json
import sys
import time
import uuid

import redis


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    p.add_argument("--prefix", default="pushgw")
    p.add_argument("--app", required=True)
    p.add_argument("--voip-token")
    p.add_argument("--alert-token")
    p.add_argument("--caller-name", default="Alice Johnson")
    p.add_argument("--ring-seconds", type=int, default=30)
    p.add_argument("--timeout", type=float, default=10.0)
    args = p.parse_args()
    if not args.voip_token and not args.alert_token:
        p.error("give --voip-token, --alert-token or both")

    r = redis.Redis.from_url(args.redis_url, decode_responses=True)
    calls = f"{args.prefix}:{{{args.app}}}:calls"
    results = f"{args.prefix}:{{{args.app}}}:results"

    # Remember where the results stream ends now, so our result cannot slip by unseen.
    last = r.xrevrange(results, count=1)
    cursor = last[0][0] if last else "0-0"

    call_id = f"call-{uuid.uuid4().hex[:12]}"
    event = {"v": 1, "id": call_id, "type": "incoming_call",
             "deadline": int(time.time() * 1000) + args.ring_seconds * 1000,
             "voip": {"caller": "+15551234567", "callerName": args.caller_name}}
    if args.voip_token:
        event["voip_token"] = args.voip_token
    if args.alert_token:
        event["alert_token"] = args.alert_token
    r.xadd(calls, {"event": json.dumps(event)})

    end = time.monotonic() + args.timeout
    while time.monotonic() < end:
        block = max(1, int((end - time.monotonic()) * 1000))
        for _stream, entries in r.xread({results: cursor}, block=block) or []:
            for entry_id, fields in entries:
                cursor = entry_id
                result = json.loads(fields["result"])
                if result.get("id") == call_id:
                    print(json.dumps(result, sort_keys=True))
                    return 0
    print(f"no result for {call_id} within {args.timeout} s", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
