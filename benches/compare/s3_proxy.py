"""A latency-injecting HTTP proxy in front of an S3 server, for the S3
benchmarks (benches/compare/analyst_s3.sh).

Every request waits LATENCY_MS before it is forwarded, as a round trip to
a distant object store would, and is logged as one line
"METHOD PATH STATUS BYTES START_MS UPSTREAM_MS" to LOG (BYTES: the
response body's length; START_MS: when the request arrived, in ms since
the epoch; UPSTREAM_MS: how long the S3 server took to answer it), so that
a run can count the requests and bytes each reader made, and see which of
them waited on which.

Usage: python s3_proxy.py UPSTREAM_PORT LISTEN_PORT LATENCY_MS LOG

Connections are kept alive as the client asks (HTTP/1.1); one thread per
client connection, each with its own connection upstream, so a client that
reads concurrently gets its reads forwarded concurrently.
"""
import http.client
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

UPSTREAM_PORT = int(sys.argv[1])
LISTEN_PORT = int(sys.argv[2])
LATENCY = int(sys.argv[3]) / 1000
LOG = open(sys.argv[4], "a", buffering=1)
LOG_LOCK = threading.Lock()
# Hop-by-hop headers are the proxy's own; the body is re-framed with a length.
HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


class Proxy(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: with Nagle's algorithm the
    # body waited for the client's delayed ACK of the headers, 40 ms that
    # no real store adds.
    disable_nagle_algorithm = True

    def forward(self) -> None:
        start = time.time()
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        time.sleep(LATENCY)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        if body is not None:
            headers["Content-Length"] = str(len(body))
        # The upstream connection is this client connection's; one that
        # the server closed meanwhile is opened again, once.
        for attempt in (1, 2):
            upstream = getattr(self, "upstream", None)
            if upstream is None:
                upstream = self.upstream = http.client.HTTPConnection("127.0.0.1", UPSTREAM_PORT)
            try:
                asked = time.time()
                upstream.request(self.command, self.path, body, headers)
                response = upstream.getresponse()
                data = response.read()
                answered = time.time()
                break
            except (http.client.HTTPException, ConnectionError):
                upstream.close()
                self.upstream = None
                if attempt == 2:
                    raise
        self.send_response(response.status, response.reason)
        for key, value in response.getheaders():
            if key.lower() not in HOP:
                self.send_header(key, value)
        # A HEAD response states the object's length, not its own.
        length = response.getheader("Content-Length") if self.command == "HEAD" else None
        self.send_header("Content-Length", length or str(len(data)))
        # Logged before the client has its answer: a client that exits on
        # it has every request of its run counted in its run.
        with LOG_LOCK:
            LOG.write(
                f"{self.command} {self.path} {response.status} {len(data)} "
                f"{start * 1000:.1f} {(answered - asked) * 1000:.1f}\n"
            )
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = forward

    def log_message(self, *args) -> None:  # the log above is the record
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", LISTEN_PORT), Proxy)
    server.daemon_threads = True
    print(f"listening on 127.0.0.1:{LISTEN_PORT}", flush=True)
    server.serve_forever()
