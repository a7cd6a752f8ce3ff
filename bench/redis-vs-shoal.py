#!/usr/bin/env python3
"""redis-server 7.0 against `shoal serve --workers 1`, side by side, in one run.

Builds release shoal, starts both servers on free ports pinned to CPU 0
(taskset), runs redis-benchmark pinned to CPU 1 with 50 clients at pipeline 1
and 16 for PING_MBULK, SET, GET, INCR and MSET, alternating redis, shoal,
redis, shoal (--rounds pairs) to spread noise, parses the --csv output and
prints one table: requests/s of each (mean over the rounds), the ratio
shoal/redis, and p50/p99 latency in ms (mean over the rounds).

Needs redis-server, redis-benchmark and taskset; only the standard library.
Usage: python3 bench/redis-vs-shoal.py [--requests N] [--rounds R] [--tests a,b]
"""

import argparse
import csv
import io
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TESTS = ["ping_mbulk", "set", "get", "incr", "mset"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"{what} exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                if s.recv(16).startswith(b"+PONG"):
                    return
        except OSError:
            time.sleep(0.05)
    sys.exit(f"{what} did not answer PING on port {port}")


def stop(proc):
    if proc and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def bench(port, test, pipeline, requests, clients, keyspace):
    argv = ["taskset", "-c", "1", "redis-benchmark", "-h", "127.0.0.1", "-p", str(port),
            "-c", str(clients), "-n", str(requests), "-P", str(pipeline), "-r", str(keyspace),
            "-t", test, "--csv"]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return None
    rows = [r for r in csv.DictReader(io.StringIO(p.stdout)) if r.get("rps")]
    if p.returncode != 0 or not rows:
        return None
    row = rows[0]
    return float(row["rps"]), float(row["p50_latency_ms"]), float(row["p99_latency_ms"])


def mean(xs):
    return sum(xs) / len(xs)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=200_000, help="requests per run at pipeline 1")
    ap.add_argument("--requests-pipelined", type=int, default=2_000_000,
                    help="requests per run at pipeline 16")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--keyspace", type=int, default=100_000, help="redis-benchmark -r")
    ap.add_argument("--rounds", type=int, default=2, help="redis/shoal pairs per test")
    ap.add_argument("--tests", default=",".join(TESTS))
    ap.add_argument("--no-build", action="store_true")
    args = ap.parse_args()

    if not args.no_build:
        subprocess.run(["cargo", "build", "--release", "-p", "shoal"], cwd=REPO, check=True)
    shoal_bin = REPO / "target" / "release" / "shoal"
    redis_port, shoal_port = free_port(), free_port()
    name = f"shoal-bench-{os.getpid()}"
    redis = shoal = None
    try:
        redis = subprocess.Popen(
            ["taskset", "-c", "0", "redis-server", "--port", str(redis_port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shoal = subprocess.Popen(
            ["taskset", "-c", "0", str(shoal_bin), "serve", "--workers", "1", "--port", str(shoal_port),
             "--name", name, "--memory", "512m"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(redis_port, redis, "redis-server")
        wait_port(shoal_port, shoal, "shoal serve")
        version = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout.split()[2].removeprefix("v=")
        print(f"redis-server {version} on :{redis_port}, shoal --workers 1 on :{shoal_port}, both on CPU 0; "
              f"redis-benchmark on CPU 1, -c {args.clients} -r {args.keyspace}, "
              f"{args.rounds} alternating rounds each", flush=True)

        rows = []
        for test in args.tests.split(","):
            for pipeline, n in ((1, args.requests), (16, args.requests_pipelined)):
                got = {"redis": [], "shoal": []}
                for _ in range(args.rounds):
                    for who, port in (("redis", redis_port), ("shoal", shoal_port)):
                        r = bench(port, test, pipeline, n, args.clients, args.keyspace)
                        if r is not None:
                            got[who].append(r)
                rows.append((test.upper(), pipeline, got))
                print(".", end="", flush=True, file=sys.stderr)
        print(file=sys.stderr)
    finally:
        stop(redis)
        stop(shoal)
        try:
            os.unlink(f"/dev/shm/{name}")
        except FileNotFoundError:
            pass

    head = f"{'test':<11} {'P':>3} {'redis rps':>11} {'shoal rps':>11} {'shoal/redis':>11}  " \
           f"{'redis p50':>9} {'shoal p50':>9} {'redis p99':>9} {'shoal p99':>9}"
    print(head)
    print("-" * len(head))
    for test, pipeline, got in rows:
        def col(who, i, fmt):
            return fmt.format(mean([g[i] for g in got[who]])) if got[who] else "failed"
        ratio = (f"{mean([g[0] for g in got['shoal']]) / mean([g[0] for g in got['redis']]):.2f}"
                 if got["redis"] and got["shoal"] else "-")
        print(f"{test:<11} {pipeline:>3} {col('redis', 0, '{:.0f}'):>11} {col('shoal', 0, '{:.0f}'):>11} "
              f"{ratio:>11}  {col('redis', 1, '{:.3f}'):>9} {col('shoal', 1, '{:.3f}'):>9} "
              f"{col('redis', 2, '{:.3f}'):>9} {col('shoal', 2, '{:.3f}'):>9}")
    print("latencies in ms; rps and latencies are means over the rounds; "
          "'failed' = redis-benchmark gave no result (e.g. command missing)")


if __name__ == "__main__":
    main()
