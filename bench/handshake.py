#!/usr/bin/env python3
"""New-host handshake timing for bench/https-load.sh.

    handshake.py PROXY_PORT|- CA_FILE ORIGIN_PORT PASS FIRST LAST TARGET

For each host 127.0.0.FIRST .. 127.0.0.LAST (one after another): opens a TCP connection
to the proxy on 127.0.0.1:PROXY_PORT (or, with "-", straight to the host), then times
  handshake: CONNECT sent -> "200" read -> TLS handshake done (client side), and
  ttfb:      GET /page sent -> first response byte,
and prints one JSON line per host. The SSL context (trusting only CA_FILE) is built once,
so no certificate store is loaded inside the timed part, and there is no process start
per host. Python's ssl module is OpenSSL, as for curl.
"""
import json
import socket
import ssl
import sys
import time

proxy_port, ca, origin_port, pass_, first, last, target = sys.argv[1:8]
origin_port = int(origin_port)
ctx = ssl.create_default_context(cafile=ca)
ctx.set_alpn_protocols(["http/1.1"])


def probe(host):
    authority = f"{host}:{origin_port}"
    if proxy_port == "-":
        sock = socket.create_connection((host, origin_port), timeout=10)
    else:
        sock = socket.create_connection(("127.0.0.1", int(proxy_port)), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        t0 = time.perf_counter()
        if proxy_port != "-":
            sock.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = sock.recv(4096)
                if not chunk:
                    raise OSError("proxy closed the connection after CONNECT")
                head += chunk
            if not head.startswith(b"HTTP/1.1 200") and not head.startswith(b"HTTP/1.0 200"):
                status_line = head.split(b"\r\n", 1)[0]
                raise OSError(f"CONNECT answered {status_line!r}")
        t1 = time.perf_counter()
        tls = ctx.wrap_socket(sock, server_hostname=host)
        t2 = time.perf_counter()
        tls.sendall(
            f"GET /page HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: loadbench/1.0\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        first_bytes = tls.recv(64)
        t3 = time.perf_counter()
        code = int(first_bytes.split(b" ", 2)[1])
        while tls.recv(65536):
            pass
        tls.close()
        return {"code": code, "connect_us": (t1 - t0) * 1e6, "handshake_us": (t2 - t0) * 1e6,
                "tls_us": (t2 - t1) * 1e6, "ttfb_us": (t3 - t2) * 1e6}
    except (OSError, ValueError, IndexError) as e:
        return {"code": 0, "error": str(e)[:200]}
    finally:
        sock.close()


for i in range(int(first), int(last) + 1):
    host = f"127.0.0.{i}"
    rec = {"target": target, "pass": pass_, "host": host}
    rec.update(probe(host))
    print(json.dumps(rec), flush=True)
