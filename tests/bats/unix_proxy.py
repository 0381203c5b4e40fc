#!/usr/bin/env python3
"""A unix-socket TCP-stream proxy a test can cut: unix_proxy.py LISTEN TARGET.

Listens on the unix socket LISTEN (a path in the test's own directory) and
forwards every connection, both ways, to the unix socket TARGET (the Docker
engine's).  Killing the process drops every connection at once, which is
what an engine restart or a broken link looks like to a client.  Nothing is
bound to a network address.
"""
import os
import socket
import sys
import threading


def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def serve(client, target):
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(target)
    except OSError:
        client.close()
        return
    a = threading.Thread(target=pump, args=(client, upstream), daemon=True)
    b = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    a.start()
    b.start()
    a.join()
    b.join()
    client.close()
    upstream.close()


def main():
    listen, target = sys.argv[1], sys.argv[2]
    try:
        os.unlink(listen)
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(listen)
    srv.listen(128)
    while True:
        client, _ = srv.accept()
        threading.Thread(target=serve, args=(client, target), daemon=True).start()


if __name__ == "__main__":
    main()
