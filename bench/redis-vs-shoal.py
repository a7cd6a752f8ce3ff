#!/usr/bin/env python3
"""redis-server 7.0 against `shoal serve --workers 1`, side by side, in one run.

Builds release shoal, starts both servers on free ports pinned to CPU 0
(taskset), runs redis-benchmark pinned to CPU 1 with 50 clients at pipeline 1
and 16 for each test (strings: PING_MBULK, SET, GET, INCR, MSET; collections:
LPUSH, LPOP, LRANGE_100, SADD, HSET, ZADD, ZRANGE_100, and the same writes
over 100,000 small collections: LPUSH_SMALL, SADD_SMALL, HSET_SMALL,
ZADD_SMALL; streams: XADD,
XRANGE_100, XREADGROUP, XACK), alternating redis,
shoal, redis, shoal (--rounds pairs) to spread noise, parses the --csv output
and prints one table: requests/s of each (mean over the rounds), the ratio
shoal/redis, and p50/p99 latency in ms (mean over the rounds).

Needs redis-server, redis-benchmark and taskset; only the standard library.
Usage: python3 bench/redis-vs-shoal.py [--requests N] [--rounds R] [--tests a,b]
                                       [--servers redis,shoal]
"""

import argparse
import os
import subprocess
import sys

import servers

# Test name -> (redis-benchmark arguments that measure it, arguments run just
# before it to fill the key it reads, or None). The names are redis-benchmark's
# own -t names where one exists. LRANGE_100 fills its list itself: `-t
# lrange_100` first runs "LPUSH (needed to benchmark LRANGE)" with the same -n,
# then LRANGE mylist 0 99. LPOP and ZRANGE_100 get the same kind of fill, run
# as a separate redis-benchmark with the same -n, -c and -r (at -P 16, only to
# be quick): LPUSH mylist for LPOP, so that every LPOP pops an element, and
# ZADD myzset for ZRANGE_100 (redis-benchmark 7.0's `-t zadd` sends
# ZADD myzset __rand_int__ element:__rand_int__, so with -r 100000 the zset
# holds about 100,000 members).
# The *_small tests are the other shape: many small collections. Each
# __rand_int__ is its own draw from the keyspace, so the writes spread over
# 100,000 keys (at -r 100000) and nearly every one adds a member: with
# -n 2000000 (pipeline 16) each collection ends near 20 members, with
# -n 200000 (pipeline 1) near 2. The keys stay from one run to the next
# (the server is started once), so later rounds find bigger collections.
TESTS = {
    "ping_mbulk": (["-t", "ping_mbulk"], None),
    "set": (["-t", "set"], None),
    "get": (["-t", "get"], None),
    "incr": (["-t", "incr"], None),
    "mset": (["-t", "mset"], None),
    "lpush": (["-t", "lpush"], None),
    "lpop": (["-t", "lpop"], ["-t", "lpush"]),
    "lrange_100": (["-t", "lrange_100"], None),
    "sadd": (["-t", "sadd"], None),
    "hset": (["-t", "hset"], None),
    "zadd": (["-t", "zadd"], None),
    "zrange_100": (["zrange", "myzset", "0", "99"], ["-t", "zadd"]),
    "lpush_small": (["lpush", "ls:__rand_int__", "v"], None),
    "sadd_small": (["sadd", "ss:__rand_int__", "__rand_int__"], None),
    "hset_small": (["hset", "hs:__rand_int__", "__rand_int__", "v"], None),
    "zadd_small": (["zadd", "zs:__rand_int__", "__rand_int__", "__rand_int__"], None),
    "xadd": (["xadd", "mystream", "*", "field", "__rand_int__"], None),
    "xrange_100": (["xrange", "mystream", "-", "+", "count", "100"],
                   ["xadd", "mystream", "*", "field", "__rand_int__"]),
    "xreadgroup": (["xreadgroup", "group", "g", "c", "count", "1", "streams", "mystream", ">"],
                   lambda port, requests, clients, keyspace: fill_group(port, requests, clients, keyspace)),
    "xack": (["xack", "mystream", "g", "0-__rand_int__"],
             lambda port, requests, clients, keyspace: fill_pending(port, keyspace)),
}
SERVERS = ["redis", "shoal"]


def cli(port, *args, stdin=None):
    """One redis-cli call (or `--pipe` when stdin is given); True when it worked."""
    argv = ["redis-cli", "-h", "127.0.0.1", "-p", str(port)] + (["--pipe"] if stdin else list(args))
    p = subprocess.run(argv, input=stdin, capture_output=True, timeout=600)
    return p.returncode == 0 and not p.stdout.startswith(b"ERR") and b"errors: 0" in p.stdout \
        if stdin else p.returncode == 0 and not p.stdout.startswith((b"ERR", b"BUSYGROUP", b"WRONGTYPE"))


def resp(*words):
    return b"*%d\r\n" % len(words) + b"".join(b"$%d\r\n%s\r\n" % (len(w), w) for w in words)


def fill_group(port, requests, clients, keyspace):
    """A fresh stream of `requests` entries and a group `g` at its start, so
    every XREADGROUP ... > delivers one new entry."""
    return (cli(port, "del", "mystream")
            and cli(port, "xgroup", "create", "mystream", "g", "0", "mkstream")
            and servers.redis_benchmark(port, ["xadd", "mystream", "*", "field", "__rand_int__"],
                                16, requests, clients, keyspace) is not None)


def fill_pending(port, keyspace):
    """Entries 0-1 .. 0-keyspace all delivered to consumer `c` of group `g`,
    so XACK mystream g 0-__rand_int__ finds (and then acks) pending IDs."""
    xadds = b"".join(resp(b"xadd", b"mystream", b"0-%d" % i, b"field", b"v") for i in range(1, keyspace + 1))
    return (cli(port, "del", "mystream")
            and cli(port, stdin=xadds)
            and cli(port, "xgroup", "create", "mystream", "g", "0")
            and cli(port, "xreadgroup", "group", "g", "c", "count", str(keyspace), "streams", "mystream", ">"))


def bench(port, test, pipeline, requests, clients, keyspace):
    args, fill = TESTS[test]
    if callable(fill):
        if not fill(port, requests, clients, keyspace):
            return None
    elif fill is not None and servers.redis_benchmark(port, fill, 16, requests, clients, keyspace) is None:
        return None
    return servers.benchmark_figures(port, args, pipeline, requests, clients, keyspace)


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
    ap.add_argument("--tests", default=",".join(TESTS),
                    help=f"comma-separated, from: {','.join(TESTS)} (default: all)")
    ap.add_argument("--servers", default=",".join(SERVERS),
                    help="comma-separated, from: redis,shoal (default: both)")
    ap.add_argument("--no-build", action="store_true")
    args = ap.parse_args()
    tests = args.tests.split(",")
    for test in tests:
        if test not in TESTS:
            ap.error(f"unknown test {test!r}; known: {','.join(TESTS)}")
    run = args.servers.split(",")
    for who in run:
        if who not in SERVERS:
            ap.error(f"unknown server {who!r}; known: {','.join(SERVERS)}")

    if "shoal" in run and not args.no_build:
        servers.build_shoal()
    ports = {who: servers.free_port() for who in run}
    name = f"shoal-bench-{os.getpid()}"
    procs = []
    try:
        if "redis" in run:
            procs.append(servers.start_redis(ports["redis"]))
        if "shoal" in run:
            procs.append(servers.start_shoal(ports["shoal"], name, "512m"))
        started = []
        if "redis" in run:
            started.append(f"redis-server {servers.redis_version()} on :{ports['redis']}")
        if "shoal" in run:
            started.append(f"shoal --workers 1 on :{ports['shoal']}")
        print(f"{', '.join(started)}, on CPU {servers.SERVER_CPU}; "
              f"redis-benchmark on CPU {servers.CLIENT_CPU}, -c {args.clients} -r {args.keyspace}, "
              f"{args.rounds} alternating rounds each", flush=True)

        rows = []
        for test in tests:
            for pipeline, n in ((1, args.requests), (16, args.requests_pipelined)):
                got = {who: [] for who in run}
                for _ in range(args.rounds):
                    for who in run:
                        r = bench(ports[who], test, pipeline, n, args.clients, args.keyspace)
                        if r is not None:
                            got[who].append(r)
                rows.append((test.upper(), pipeline, got))
                print(".", end="", flush=True, file=sys.stderr)
        print(file=sys.stderr)
    finally:
        for proc in procs:
            servers.stop(proc)
        servers.remove_segment(name)

    head = f"{'test':<11} {'P':>3} {'redis rps':>11} {'shoal rps':>11} {'shoal/redis':>11}  " \
           f"{'redis p50':>9} {'shoal p50':>9} {'redis p99':>9} {'shoal p99':>9}"
    print(head)
    print("-" * len(head))
    for test, pipeline, got in rows:
        def col(who, i, fmt):
            if who not in got:
                return "-"
            return fmt.format(mean([g[i] for g in got[who]])) if got[who] else "failed"
        ratio = (f"{mean([g[0] for g in got['shoal']]) / mean([g[0] for g in got['redis']]):.2f}"
                 if got.get("redis") and got.get("shoal") else "-")
        print(f"{test:<11} {pipeline:>3} {col('redis', 0, '{:.0f}'):>11} {col('shoal', 0, '{:.0f}'):>11} "
              f"{ratio:>11}  {col('redis', 1, '{:.3f}'):>9} {col('shoal', 1, '{:.3f}'):>9} "
              f"{col('redis', 2, '{:.3f}'):>9} {col('shoal', 2, '{:.3f}'):>9}")
    print("latencies in ms; rps and latencies are means over the rounds; "
          "'failed' = redis-benchmark gave no result (e.g. command missing); '-' = not run")


if __name__ == "__main__":
    main()
