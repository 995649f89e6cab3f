"""The webhook judge for the operational parity fixture (127.0.0.1 only).

POST /judge reads promptfoo's webhook body {"output", "context": {"prompt", "vars"}} and answers
according to the output's first word; the reason it sends back describes the request it received, so
the golden file also pins the request format. POST /status500 answers HTTP 500.

    python webhook_server.py [PORT]   # prints http://127.0.0.1:PORT, serves until killed
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REPLIES = {
    "good": {"pass": True, "score": 0.8},
    "bad": {"pass": False, "score": 0.25},
    "plain": {"pass": True},
    "silent": {"pass": False},
    "stringy": {"pass": "false"},
    "told": {"pass": False, "reason": "the judge says no"},
}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path != "/judge":
            self._send(500, b"no")
            return
        request = json.loads(body)
        output = request["output"]
        reply = dict(REPLIES.get(str(output).split(" ")[0], {"pass": True}))
        if "reason" not in reply and reply["pass"] is True and "score" in reply:
            context = request["context"]
            reply["reason"] = (f"keys={sorted(request)} context={sorted(context)} "
                               f"output={output!r} prompt={context['prompt']!r} vars={json.dumps(context['vars'], sort_keys=True)} "
                               f"type={self.headers.get('Content-Type')}")
        self._send(200, json.dumps(reply).encode())

    def _send(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def start(port: int = 0) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


if __name__ == "__main__":
    srv = start(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
    print(f"http://127.0.0.1:{srv.server_address[1]}", flush=True)
    threading.Event().wait()
