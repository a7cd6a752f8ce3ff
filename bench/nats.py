#!/usr/bin/env python3
"""NATS: nats-server 2.9 against `shoal serve --workers 1`, side by side, one run.

Starts nats-server (GOMAXPROCS=1) and `shoal serve --workers 1` (private ports
and segment), both pinned to CPU 0 (taskset), and runs the same client, pinned
to CPU 1, against each: one publisher and 1, 10 and 100 subscribers of one
subject, over raw sockets in one process. Throughput: the publisher sends
--messages messages of 16 and 128 bytes as fast as the sockets take them; the
figure is messages delivered per second, summed over the subscribers, from the
first send to the last message received. Latency: one message at a time, each
sent once the previous one reached every subscriber; p99 of publish-to-receive
times over every delivery, in microseconds. The client is Python, so with many
subscribers it, not the server, may be the bottleneck: compare the ratios.

Needs nats-server and taskset; only the standard library.
Usage: python3 bench/nats.py [--subscribers 1,10,100] [--sizes 16,128]
                             [--messages N] [--no-build]
"""

import argparse
import os
import selectors
import socket
import subprocess
import sys
import time
import uuid

import servers

SUBJECT = b"bench.nats"


def start_nats_server(port):
    env = {**os.environ, "GOMAXPROCS": "1"}
    proc = subprocess.Popen(
        ["taskset", "-c", servers.SERVER_CPU, "nats-server", "-a", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wait_port(port)
    return proc


def start_shoal(port, nats_port, name):
    proc = subprocess.Popen(
        ["taskset", "-c", servers.SERVER_CPU, str(servers.SHOAL_BIN), "serve", "--workers", "1",
         "--port", str(port), "--name", name, "--memory", "256m",
         "--memcached-port", "0", "--memcached-udp-port", "0", "--http-port", "0",
         "--nats-port", str(nats_port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(nats_port)
    return proc


def wait_port(port, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"nothing listens on {port}")


def connect(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n')
    got = b""
    while b"PONG\r\n" not in got:
        got += s.recv(65536)
    return s


def subscribe(conns):
    for s in conns:
        s.sendall(b"SUB " + SUBJECT + b" 1\r\nPING\r\n")
    for s in conns:
        got = b""
        while b"PONG\r\n" not in got:
            got += s.recv(65536)


def throughput(port, subscribers, size, messages):
    subs = [connect(port) for _ in range(subscribers)]
    subscribe(subs)
    pub = connect(port)
    payload = b"x" * size
    frame = b"PUB %s %d\r\n%s\r\n" % (SUBJECT, size, payload)
    batch = frame * 1000
    sel = selectors.DefaultSelector()
    counts = {}
    # The last bytes of each subscriber's input: "MSG " may straddle reads.
    tails = {}
    for s in subs:
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ)
        counts[s] = 0
        tails[s] = b""
    want = messages
    start = time.perf_counter()
    sent = 0
    pub.setblocking(False)
    pending = memoryview(b"")
    while min(counts.values()) < want:
        if sent < messages and not pending:
            pending = memoryview(batch[: len(frame) * min(1000, messages - sent)])
            sent += len(pending) // len(frame)
        if pending:
            try:
                n = pub.send(pending)
                pending = pending[n:]
            except BlockingIOError:
                pass
        for key, _ in sel.select(timeout=0 if pending or sent < messages else 1):
            data = key.fileobj.recv(1 << 20)
            if not data:
                sys.exit(f"a subscriber on port {port} was closed")
            data = tails[key.fileobj] + data
            counts[key.fileobj] += data.count(b"MSG ")
            tails[key.fileobj] = data[-3:]
    elapsed = time.perf_counter() - start
    for s in subs + [pub]:
        s.close()
    return subscribers * messages / elapsed


def latency(port, subscribers, size, rounds=300):
    subs = [connect(port) for _ in range(subscribers)]
    subscribe(subs)
    pub = connect(port)
    frame = b"PUB %s %d\r\n%s\r\n" % (SUBJECT, size, b"y" * size)
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        pub.sendall(frame)
        for s in subs:
            got = b""
            while b"MSG " not in got or not got.endswith(b"\r\n") or got.count(b"\r\n") < 2:
                got += s.recv(65536)
            times.append(time.perf_counter() - t0)
    for s in subs + [pub]:
        s.close()
    times.sort()
    return times[int(len(times) * 0.99) - 1] * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--subscribers", default="1,10,100")
    ap.add_argument("--sizes", default="16,128")
    ap.add_argument("--messages", type=int, default=50_000)
    ap.add_argument("--no-build", action="store_true")
    args = ap.parse_args()
    if not args.no_build:
        servers.build_shoal()
    os.sched_setaffinity(0, {int(servers.CLIENT_CPU)})
    nats_port, shoal_port, shoal_nats = servers.free_port(), servers.free_port(), servers.free_port()
    name = f"shoal-bench-nats-{uuid.uuid4().hex[:8]}"
    procs = {"nats-server": start_nats_server(nats_port),
             "shoal": start_shoal(shoal_port, shoal_nats, name)}
    ports = {"nats-server": nats_port, "shoal": shoal_nats}
    try:
        print(f"{'subs':>5} {'size':>5} {'nats-server msg/s':>18} {'shoal msg/s':>12} "
              f"{'ratio':>6} {'nats p99 us':>12} {'shoal p99 us':>13}")
        for n in [int(x) for x in args.subscribers.split(",")]:
            for size in [int(x) for x in args.sizes.split(",")]:
                rate = {k: throughput(p, n, size, args.messages // n or 1) for k, p in ports.items()}
                p99 = {k: latency(p, n, size, rounds=max(20, 300 // n)) for k, p in ports.items()}
                print(f"{n:>5} {size:>5} {rate['nats-server']:>18,.0f} {rate['shoal']:>12,.0f} "
                      f"{rate['shoal'] / rate['nats-server']:>6.2f} {p99['nats-server']:>12,.0f} "
                      f"{p99['shoal']:>13,.0f}", flush=True)
    finally:
        for p in procs.values():
            p.terminate()
            p.wait()
        for f in os.listdir("/dev/shm"):
            if f.startswith(name):
                os.remove(os.path.join("/dev/shm", f))


if __name__ == "__main__":
    main()
