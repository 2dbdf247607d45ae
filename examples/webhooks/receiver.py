#!/usr/bin/env python3
"""A webhook receiver for pushgw's results (docs/webhooks.md): verifies each delivery's
Pushgw-Signature and appends one JSON line per delivery to a file.

usage: receiver.py PORT SECRET_FILE OUT_FILE [STATUS]
  STATUS: what to answer a verified delivery (default 204); a delivery whose signature does
  not verify gets 401. Each line of OUT_FILE: {"verified": bool, "idempotency_key": …,
  "status": answered, "result": the result JSON, "signature": the header, "body": the raw
  body}. Listens on 127.0.0.1 only.
"""
import hashlib
import hmac
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


# The verification of docs/webhooks.md, as a receiver should do it.
def verify(secret: bytes, header: str, body: bytes, tolerance_s: int = 300) -> bool:
    """True when `header` (Pushgw-Signature) signs `body` (the raw bytes) with `secret`,
    made less than `tolerance_s` ago."""
    try:
        parts = dict(p.split("=", 1) for p in header.split(","))
        t = int(parts["t"])
    except (ValueError, KeyError):
        return False
    if abs(time.time() - t) > tolerance_s:
        return False
    expected = hmac.new(secret, f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, parts.get("v1", ""))


def main():
    port, secret_file, out_file = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    status = int(sys.argv[4]) if len(sys.argv) > 4 else 204
    secret = open(secret_file, "rb").read().strip()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            ok = verify(secret, self.headers.get("Pushgw-Signature", ""), body)
            answer = status if ok else 401
            with open(out_file, "a") as out:
                out.write(json.dumps({"verified": ok, "idempotency_key": self.headers.get("Idempotency-Key"),
                                      "status": answer, "result": json.loads(body or b"null"),
                                      "signature": self.headers.get("Pushgw-Signature"), "body": body.decode()}) + "\n")
            self.send_response(answer)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    ThreadingHTTPServer.allow_reuse_address = True
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
