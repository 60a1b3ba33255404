#!/usr/bin/env python3
"""A small loopback origin for tests/e2e.sh: robots.txt, pages, a private area.

Usage: e2e_origin.py [--tls CERT KEY]. Prints its port on stdout, then serves
until killed. Counts robots.txt fetches
at /__robots_fetches so the script can check the proxy's cache.
"""
import http.server
import sys
import threading

ROBOTS = b"""User-agent: *
Disallow: /private
Allow: /private/open

User-agent: StrictBot
Disallow: /
"""

robots_fetches = 0
lock = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_text(self, status, body, extra=()):
        data = body if isinstance(body, bytes) else body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        global robots_fetches
        if self.path == "/robots.txt":
            with lock:
                robots_fetches += 1
            self.send_text(200, ROBOTS)
        elif self.path == "/__robots_fetches":
            self.send_text(200, str(robots_fetches))
        elif self.path.startswith("/big?bytes="):
            # A large body streamed in 1 MiB chunks, never held in memory.
            total = int(self.path.split("=", 1)[1])
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(total))
            self.end_headers()
            chunk = b"\0" * (1 << 20)
            sent = 0
            while sent < total:
                part = chunk[: min(len(chunk), total - sent)]
                self.wfile.write(part)
                sent += len(part)
        elif self.path == "/echo-headers":
            lines = "".join(f"{k}: {v}\n" for k, v in self.headers.items())
            self.send_text(200, lines)
        else:
            self.send_text(200, f"hello from {self.path}\n")

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        self.send_text(200, b"got " + body)


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
if len(sys.argv) == 4 and sys.argv[1] == "--tls":
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(sys.argv[2], sys.argv[3])
    server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
