#!/usr/bin/env python3
"""A hostile client of the allow-list proxy, run inside a sandbox
(netproxy.bats).  The proxy is 127.0.0.1:3128 in the sandbox's network.

  proxy_client.py raw TEXT        sends TEXT (\\r \\n escapes), prints the answer
  proxy_client.py flood N [HOLD]  opens N connections that send nothing,
                                  prints `answered503 K open M` after 2 s and
                                  keeps them HOLD s more
  proxy_client.py slow            sends a head a byte every 0.3 s and prints
                                  `closed after S s: FIRST LINE` when cut
"""
import socket
import sys
import time

PROXY = ("127.0.0.1", 3128)


def read_all(s, wait):
    s.settimeout(wait)
    out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            out += d
    except (socket.timeout, ConnectionResetError):
        pass
    return out


def raw(text):
    s = socket.create_connection(PROXY, timeout=5)
    s.sendall(text.encode().decode("unicode_escape").encode("latin1"))
    sys.stdout.write(read_all(s, 5).decode("latin1"))


def flood(n, hold):
    socks = [socket.create_connection(PROXY, timeout=5) for _ in range(n)]
    time.sleep(2)
    refused = 0
    for s in socks:
        s.setblocking(False)
        try:
            if s.recv(64).startswith(b"HTTP/1.1 503"):
                refused += 1
        except (BlockingIOError, ConnectionResetError):
            pass
    print("answered503 %d open %d" % (refused, n - refused), flush=True)
    time.sleep(hold)


def slow():
    s = socket.create_connection(PROXY, timeout=5)
    head = b"CONNECT good.test:80 HTTP/1.1\r\nX-Pad: " + b"a" * 60
    t0 = time.time()
    for b in head:
        try:
            s.send(bytes([b]))
        except OSError:
            break
        s.settimeout(0.3)
        try:
            got = s.recv(200)
            print("closed after %.0f s: %s" % (time.time() - t0,
                  got.split(b"\r\n")[0].decode("latin1")))
            return
        except socket.timeout:
            pass
    print("still open after %.0f s" % (time.time() - t0))


if __name__ == "__main__":
    {"raw": lambda: raw(sys.argv[2]), "flood": lambda: flood(int(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else 0),
     "slow": slow}[sys.argv[1]]()
