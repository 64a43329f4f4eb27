"""A loopback stand-in for a chat-completions provider: it records each request body (one
JSON line per request, in the file named second) and answers 401. No model anywhere.

    python3 tests/plugins/stand_in_provider.py PORT OUT.jsonl
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

_REFUSAL = json.dumps({"error": {"message": "stand-in: no model here",
                                 "type": "invalid_request_error"}}).encode()


class _Recorder(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        with open(sys.argv[2], "a") as out:
            out.write(json.dumps({"path": self.path, "body": body.decode()}) + "\n")
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(_REFUSAL)))
        self.end_headers()
        self.wfile.write(_REFUSAL)

    def log_message(self, *_: object) -> None:
        pass


if __name__ == "__main__":
    HTTPServer(("127.0.0.1", int(sys.argv[1])), _Recorder).serve_forever()
