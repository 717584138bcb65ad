"""A client of turbonet serve's socket written for the security tests: it
speaks the service's protocol (one SOCK_SEQPACKET message of JSON with the
client's descriptors, then one byte back: the exit code) without the
stock client's care, as a student trying to break the service would.

    serve_client.py request ARGS...      the stock request, this process's stdio
    serve_client.py opath FILE ARGS...   ARGS with FILE passed as an O_PATH
                                         descriptor (no read permission needed)
    serve_client.py flood N COUNT        COUNT requests with N descriptors each
    serve_client.py idle N               N connections that say nothing; prints
                                         "open" once made, then for each whether
                                         the service answered or refused it
                                         before standard input closes

Exit code: the service's answer to the (last) request.
"""

import json
import os
import socket
import sys

SOCKET = os.environ["TURBONET_SERVE"]


def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(SOCKET)
    return s


def request(args, fds, file=False):
    s = connect()
    body = json.dumps({"args": args, "cwd": "/", "file": file}).encode()
    socket.send_fds(s, [body], fds)
    answer = s.recv(1)
    s.close()
    return answer[0] if answer else 255


def main():
    what = sys.argv[1]
    if what == "request":
        sys.exit(request(sys.argv[2:], [0, 1, 2]))
    if what == "opath":
        fd = os.open(sys.argv[2], os.O_PATH)
        sys.exit(request(sys.argv[3:], [0, 1, 2, fd], file=True))
    if what == "flood":
        n, count = int(sys.argv[2]), int(sys.argv[3])
        fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(n)]
        code = 0
        for _ in range(count):
            code = request(["lab", "list"], fds)
        sys.exit(code)
    if what == "idle":
        conns = [connect() for _ in range(int(sys.argv[2]))]
        print("open", flush=True)
        sys.stdin.read()
        for c in conns:
            c.setblocking(False)
            try:
                got = c.recv(1)
                print("answered" if got else "closed")
            except BlockingIOError:
                print("waiting")
        sys.exit(0)
    sys.exit(f"unknown: {what}")


main()
