#!/usr/bin/env python3
"""slow_relay.py LISTEN_PORT TARGET_PORT: a TCP relay on 127.0.0.1 that passes
the target's replies on in 2 KiB pieces, 30 ms apart, so a clone through it
lasts long enough for a test to watch its progress.  Serves one connection
at a time until killed."""
import socket
import sys
import threading
import time

listen, target = int(sys.argv[1]), int(sys.argv[2])


def pump(src, dst, slow):
    try:
        while True:
            data = src.recv(2048)
            if not data:
                break
            dst.sendall(data)
            if slow:
                time.sleep(0.03)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", listen))
srv.listen(4)
while True:
    c, _ = srv.accept()
    t = socket.create_connection(("127.0.0.1", target))
    threading.Thread(target=pump, args=(c, t, False), daemon=True).start()
    threading.Thread(target=pump, args=(t, c, True), daemon=True).start()
