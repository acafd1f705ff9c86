"""An HTTP proxy in front of an S3 server that answers some requests with
503: before forwarding them (nothing happened) or after (the request took
effect, the client sees an error: the ambiguous outcome). object_store
retries 5xx answers, so a retried create that landed meets its own object.

Usage: python3 fault_proxy.py UPSTREAM_PORT FAULT_RATE SEED  (prints its port)
"""

import http.client
import random
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

UPSTREAM = ("127.0.0.1", int(sys.argv[1]))
RATE = float(sys.argv[2])
RNG = random.Random(int(sys.argv[3]))
LOCK = threading.Lock()
HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection"}


def fault() -> str:
    with LOCK:
        r = RNG.random()
    if r < RATE / 2:
        return "before"
    if r < RATE:
        return "after"
    return ""


class Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    def _unavailable(self):
        body = b"<Error><Code>ServiceUnavailable</Code><Message>injected</Message></Error>"
        self.send_response(503)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        # No body after a HEAD: its bytes would be read as the start of the
        # next answer on the kept-alive connection, and the client's next
        # request failed as a transport error (the 6eeaeed soak's final read).
        if self.command != "HEAD":
            self.wfile.write(body)

    def _forward(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        when = fault()
        if when == "before":
            return self._unavailable()
        conn = http.client.HTTPConnection(*UPSTREAM, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        if when == "after":
            return self._unavailable()
        self.send_response(resp.status)
        # A HEAD's length is the object's, not the (empty) body's.
        head = self.command == "HEAD"
        for k, v in resp.getheaders():
            if k.lower() not in HOP and (head or k.lower() != "content-length"):
                self.send_header(k, v)
        if not head:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward


class Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # a client killed mid-request (the soak's SIGKILLs)


server = Server(("127.0.0.1", 0), Proxy)
print(server.server_address[1], flush=True)
server.serve_forever()
