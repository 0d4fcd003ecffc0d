"""A minimal steerbot external agent (protocol steerbot.agent/1), Python standard library only.
Run: STEERBOT_AGENT_SECRET=<the runner's agents.http-agent.secret> PORT=8788 python3 agent.py"""
import hashlib, hmac, json, os, time, urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET = os.environ["STEERBOT_AGENT_SECRET"].encode()

class Agent(BaseHTTPRequestHandler):
    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("content-length", 0)))
        ts, sig = self.headers.get("x-steerbot-timestamp", ""), self.headers.get("x-steerbot-signature", "")
        mac = "sha256=" + hmac.new(SECRET, ts.encode() + b"." + raw, hashlib.sha256).hexdigest()
        if not ts.isdigit() or abs(time.time() - int(ts)) > 300 or not hmac.compare_digest(mac, sig):
            return self.reply(401, b'{"error": "bad signature"}')
        body = json.loads(raw)
        if body["type"] != "run":
            return self.reply(200, b'{"ok": true}')  # a cancel: this agent keeps no work running
        self.send_response(200)
        self.send_header("content-type", "application/x-ndjson")
        self.end_headers()
        self.sent = 0
        texts = [m["text"] for m in body["inputs"]] + [m["text"] for m in self.pull(body.get("capability"))]
        self.emit({"type": "message", "text": "python agent heard: " + " / ".join(texts)})
        self.emit({"type": "state", "key": "turns", "value": body["state"].get("turns", 0) + 1})
        self.emit({"type": "result", "outcome": "completed"})

    def pull(self, cap):  # a turn boundary: take what the user sent meanwhile
        if not cap:
            return []
        data = json.dumps({"mode": "all", "eventsSent": self.sent}).encode()
        req = urllib.request.Request(cap["url"] + "/steering", data, {"authorization": "Bearer " + cap["token"], "content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as res:
            return json.load(res)["messages"]

    def emit(self, event):  # one event per line, flushed at once
        self.wfile.write(json.dumps(event).encode() + b"\n")
        self.wfile.flush()
        self.sent += 1

    def reply(self, status, data):
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass

server = ThreadingHTTPServer((os.environ.get("HOST", "127.0.0.1"), int(os.environ.get("PORT", "8788"))), Agent)
print("listening on port", server.server_port, flush=True)
server.serve_forever()
