#!/usr/bin/env python3
"""EVALSHA on redis-server 7.0 and `shoal serve --workers 1`, side by side.

Both servers are started as bench/servers.py starts them (pinned to CPU 0,
redis-benchmark on CPU 1). Each script is loaded with SCRIPT LOAD on each
server, then `redis-benchmark -c 50 -r 100000 -P <p> --csv EVALSHA <sha> ...`
runs at pipeline 1 and 16, alternating redis, shoal (--rounds pairs) so that
noise from other work on the machine falls on both. One table: requests/s of
each (mean over the rounds), the ratio shoal/redis, p50/p99 in ms, and each
server's CPU time per request (user + system from /proc, shoal's supervisor
and worker included) with its ratio redis/shoal: the cost per core, which
other work sharing the server's core moves far less than requests/s.

The scripts:
  incr   return redis.call('incr', KEYS[1])
  three  SET KEYS[1] ARGV[1], INCR KEYS[2], GET KEYS[1] (returns the value)

Needs redis-server, redis-benchmark, redis-cli and taskset; only the
standard library. Usage: python3 bench/scripting.py [--requests N]
[--requests-pipelined N] [--rounds R] [--no-build]
"""

import argparse
import os
import shutil
import subprocess
import sys

import servers

SCRIPTS = {
    "incr": ("return redis.call('incr', KEYS[1])", ["1", "counter:__rand_int__"]),
    "three": ("redis.call('set', KEYS[1], ARGV[1]) "
              "redis.call('incr', KEYS[2]) "
              "return redis.call('get', KEYS[1])",
              ["2", "key:__rand_int__", "counter:__rand_int__", "value"]),
}


def script_load(port, body):
    """SCRIPT LOAD through redis-cli; the SHA1, or None."""
    p = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), "script", "load", body],
                       capture_output=True, text=True, timeout=60)
    sha = p.stdout.strip()
    return sha if p.returncode == 0 and len(sha) == 40 else None


def evalsha(port, sha, keys_and_args, pipeline, requests, clients, keyspace):
    """One redis-benchmark run of EVALSHA; (rps, p50, p99) or None."""
    return servers.benchmark_figures(port, ["evalsha", sha] + keys_and_args, pipeline,
                                     requests, clients, keyspace)


def mean(xs):
    return sum(xs) / len(xs)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=200_000, help="requests per run at pipeline 1")
    ap.add_argument("--requests-pipelined", type=int, default=1_000_000,
                    help="requests per run at pipeline 16")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--keyspace", type=int, default=100_000, help="redis-benchmark -r")
    ap.add_argument("--rounds", type=int, default=2, help="redis/shoal pairs per run")
    ap.add_argument("--no-build", action="store_true")
    args = ap.parse_args()

    if not args.no_build:
        servers.build_shoal()
    ports = {"redis": servers.free_port(), "shoal": servers.free_port()}
    name = f"shoal-bench-scripting-{os.getpid()}"
    procs = []
    rows = []
    try:
        procs.append(servers.start_redis(ports["redis"]))
        procs.append(servers.start_shoal(ports["shoal"], name, "512m"))
        pids = {"redis": procs[0].pid, "shoal": procs[1].pid}
        print(f"redis-server {servers.redis_version()} on :{ports['redis']}, "
              f"shoal --workers 1 on :{ports['shoal']}, on CPU {servers.SERVER_CPU}; "
              f"redis-benchmark on CPU {servers.CLIENT_CPU}, -c {args.clients} "
              f"-r {args.keyspace}, {args.rounds} alternating rounds each", flush=True)
        for script, (body, keys_and_args) in SCRIPTS.items():
            shas = {who: script_load(port, body) for who, port in ports.items()}
            for pipeline, n in ((1, args.requests), (16, args.requests_pipelined)):
                got = {who: [] for who in ports}
                for _ in range(args.rounds):
                    for who, port in ports.items():
                        if shas[who] is None:
                            continue
                        cpu_before = servers.cpu_seconds(pids[who])
                        r = evalsha(port, shas[who], keys_and_args, pipeline, n,
                                    args.clients, args.keyspace)
                        if r is not None:
                            used = servers.cpu_seconds(pids[who]) - cpu_before
                            got[who].append((*r, used / n * 1e6))
                rows.append((script, pipeline, got))
                print(".", end="", flush=True, file=sys.stderr)
        print(file=sys.stderr)
    finally:
        for proc in procs:
            servers.stop(proc)
        servers.remove_segment(name)
        # The script cache shoal keeps beside its segment.
        shutil.rmtree(f"/dev/shm/{name}.scripts", ignore_errors=True)

    head = (f"{'script':<7} {'P':>3} {'redis rps':>11} {'shoal rps':>11} {'shoal/redis':>11}  "
            f"{'redis p50':>9} {'shoal p50':>9} {'redis p99':>9} {'shoal p99':>9}  "
            f"{'redis us':>8} {'shoal us':>8} {'per core':>8}")
    print(head)
    print("-" * len(head))
    for script, pipeline, got in rows:
        def col(who, i, fmt):
            return fmt.format(mean([g[i] for g in got[who]])) if got[who] else "failed"
        ratio = (f"{mean([g[0] for g in got['shoal']]) / mean([g[0] for g in got['redis']]):.2f}"
                 if got["redis"] and got["shoal"] else "-")
        per_core = (f"{mean([g[3] for g in got['redis']]) / mean([g[3] for g in got['shoal']]):.2f}"
                    if got["redis"] and got["shoal"] else "-")
        print(f"{script:<7} {pipeline:>3} {col('redis', 0, '{:.0f}'):>11} "
              f"{col('shoal', 0, '{:.0f}'):>11} {ratio:>11}  "
              f"{col('redis', 1, '{:.3f}'):>9} {col('shoal', 1, '{:.3f}'):>9} "
              f"{col('redis', 2, '{:.3f}'):>9} {col('shoal', 2, '{:.3f}'):>9}  "
              f"{col('redis', 3, '{:.2f}'):>8} {col('shoal', 3, '{:.2f}'):>8} {per_core:>8}")
    print("latencies in ms; rps and latencies are means over the rounds; us = server CPU "
          "microseconds per request; per core = redis us / shoal us; "
          "'failed' = no result (SCRIPT LOAD or redis-benchmark failed)")


if __name__ == "__main__":
    main()
