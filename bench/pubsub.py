#!/usr/bin/env python3
"""Pub/sub: redis-server 7.0 against `shoal serve --workers 2`, side by side, in one run.

Builds release shoal, starts redis-server (one process, `--save '' --appendonly
no`) and `shoal serve --workers 2` (private port and segment) pinned to CPU 0
(taskset; `--shoal-cpus 0,1` lets shoal's workers use both cores), then for 1,
10 and 100 subscribers runs `shoal bench pubsub` pinned to CPU 1 against each
server, alternating redis, shoal, redis, shoal (--rounds pairs). A round runs
the client twice, once per phase. The client has one publisher and the subscribers, spread evenly over shoal's workers
through CLIENT INFO's `worker=`, the first on the worker the publisher is not
on (so one subscriber is always on the other worker). The publisher sends
64-byte messages at full speed for --seconds after a warm-up (delivered
messages/s, summed over subscribers), or at --rate messages/s for
--latency-seconds (publish-to-receive latency). Prints
one table of medians over the rounds: delivered msg/s, ratio shoal/redis,
messages delivered per second of server CPU time (the throughput run, from
/proc: the figure per core, which holds when other work on the machine takes
CPU from a server), p50 and p99 latency in microseconds, the p99 ratio, the
client's CPU share, and whether every subscriber got every message once and
in order.

Needs redis-server and taskset; only the standard library.
Usage: python3 bench/pubsub.py [--subscribers 1,10,100] [--rounds R] [--seconds S]
                               [--servers redis,shoal] [--no-build]
"""

import argparse
import os
import statistics
import subprocess
import sys

import servers

SERVERS = ["redis", "shoal"]


def start_shoal(port, name, workers, cpus):
    """`shoal serve --workers N` on `port` with segment `name`, pinned to `cpus`."""
    proc = subprocess.Popen(
        ["taskset", "-c", cpus, str(servers.SHOAL_BIN), "serve", "--workers", str(workers),
         "--port", str(port), "--name", name, "--memory", "256m",
         "--memcached-port", "0", "--memcached-udp-port", "0", "--http-port", "0", "--nats-port", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    servers.wait_port(port, proc, "shoal serve")
    return proc


def measured(proc, port, subscribers, args):
    """Two client runs: the throughput phase alone, with `per_cpu_s` added
    (messages it delivered, warm-up included, per second of the server's CPU
    time meanwhile), then the latency phase alone; their RESULT fields merged
    (the latency run's for latency, the counts of failed checks summed), or
    an error string."""
    before = servers.cpu_seconds(proc.pid)
    t = client(port, subscribers, args, args.seconds, 0)
    used = servers.cpu_seconds(proc.pid) - before
    if not isinstance(t, dict):
        return t
    t["per_cpu_s"] = int(t["delivered_total"]) / used if used > 0 else 0.0
    lat = client(port, subscribers, args, 0, args.latency_seconds)
    if not isinstance(lat, dict):
        return lat
    for k in ("latency_rate", "p50_us", "p99_us", "p999_us", "max_us", "latency_client_cpu"):
        t[k] = lat[k]
    for k in ("lost", "gaps", "out_of_order", "receiver_mismatch"):
        t[k] = str(int(t[k]) + int(lat[k]))
    return t


def client(port, subscribers, args, seconds, latency_seconds):
    """One `shoal bench pubsub` run of `seconds` at full speed and
    `latency_seconds` at --rate: its RESULT fields, or an error string."""
    argv = ([] if args.client_cpu == "" else ["taskset", "-c", args.client_cpu]) + [
        str(servers.SHOAL_BIN), "bench", "pubsub", "--port", str(port),
        "--subscribers", str(subscribers), "--size", str(args.size),
        "--seconds", str(seconds), "--warmup", str(args.warmup),
        "--pipeline", str(args.pipeline), "--window", str(args.window),
        "--rate", str(args.rate), "--latency-seconds", str(latency_seconds),
        "--workers-check", str(args.workers)]
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return "timed out after 300 s"
    if args.verbose:
        print(p.stdout, end="", file=sys.stderr)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return dict(kv.split("=", 1) for kv in line.split()[1:])
    err = (p.stderr.strip().splitlines() or [f"exit {p.returncode}, no RESULT line"])[-1]
    return err


def median(xs):
    return statistics.median(xs) if xs else None


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--subscribers", default="1,10,100", help="comma-separated counts")
    ap.add_argument("--rounds", type=int, default=3, help="redis/shoal pairs per count")
    ap.add_argument("--seconds", type=float, default=5.0, help="throughput window")
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--latency-seconds", type=float, default=3.0)
    ap.add_argument("--rate", type=int, default=5000, help="latency phase messages/s")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--pipeline", type=int, default=64, help="publisher batch")
    ap.add_argument("--window", type=int, default=1024,
                    help="most messages the publisher runs ahead of the slowest subscriber")
    ap.add_argument("--workers", type=int, default=2, help="shoal serve --workers")
    ap.add_argument("--shoal-cpus", default=servers.SERVER_CPU,
                    help="taskset list for shoal (default: redis-server's CPU)")
    ap.add_argument("--client-cpu", default=servers.CLIENT_CPU, help="taskset list for the client; '' = none")
    ap.add_argument("--servers", default=",".join(SERVERS), help="comma-separated, from: redis,shoal")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true", help="show each client run's output")
    args = ap.parse_args()
    counts = [int(c) for c in args.subscribers.split(",")]
    run = args.servers.split(",")
    for who in run:
        if who not in SERVERS:
            ap.error(f"unknown server {who!r}; known: {','.join(SERVERS)}")

    if not args.no_build:
        servers.build_shoal()
    ports = {who: servers.free_port() for who in run}
    name = f"shoal-bench-{os.getpid()}"
    procs = {}
    got = {(n, who): [] for n in counts for who in run}
    errors = []
    try:
        if "redis" in run:
            procs["redis"] = servers.start_redis(ports["redis"])
        if "shoal" in run:
            procs["shoal"] = start_shoal(ports["shoal"], name, args.workers, args.shoal_cpus)
        started = []
        if "redis" in run:
            started.append(f"redis-server {servers.redis_version()} on CPU {servers.SERVER_CPU}")
        if "shoal" in run:
            started.append(f"shoal --workers {args.workers} on CPU {args.shoal_cpus}")
        print(f"{', '.join(started)}; client on CPU {args.client_cpu or 'any'}; "
              f"{args.size}-byte messages, pipeline {args.pipeline}, window {args.window}, "
              f"{args.seconds:g} s throughput, {args.rate} msg/s for {args.latency_seconds:g} s latency; "
              f"{args.rounds} alternating rounds; load average {os.getloadavg()[0]:.2f}", flush=True)
        for n in counts:
            for _ in range(args.rounds):
                for who in run:
                    r = measured(procs[who], ports[who], n, args)
                    if isinstance(r, dict):
                        got[(n, who)].append(r)
                    else:
                        errors.append(f"{who}, {n} subscribers: {r}")
                    print(".", end="", flush=True, file=sys.stderr)
        print(file=sys.stderr)
    finally:
        for proc in procs.values():
            servers.stop(proc)
        servers.remove_segment(name)

    head = (f"{'subs':>4} {'server':<6} {'split':>7} {'delivered/s':>12} {'shoal/redis':>11} "
            f"{'per cpu-s':>10} {'shoal/redis':>11} "
            f"{'p50 us':>8} {'p99 us':>8} {'p99 s/r':>7} {'client cpu':>10}  check")
    print(head)
    print("-" * len(head))
    for n in counts:
        med = {}
        for who in run:
            rows = got[(n, who)]
            med[who] = {k: median([float(r[k]) for r in rows])
                        for k in ("delivered_per_s", "per_cpu_s", "p50_us", "p99_us", "client_cpu",
                                  "latency_client_cpu")}
        for who in run:
            rows = got[(n, who)]
            m = med[who]
            ratio = cpu_ratio = p99_ratio = None
            if who == "shoal" and "redis" in med and m["delivered_per_s"] and med["redis"]["delivered_per_s"]:
                ratio = m["delivered_per_s"] / med["redis"]["delivered_per_s"]
                cpu_ratio = m["per_cpu_s"] / med["redis"]["per_cpu_s"] if med["redis"]["per_cpu_s"] else None
                p99_ratio = m["p99_us"] / med["redis"]["p99_us"] if med["redis"]["p99_us"] else None
            bad = {k: sum(int(r[k]) for r in rows)
                   for k in ("lost", "gaps", "out_of_order", "receiver_mismatch")}
            slow = [float(r["latency_rate"]) for r in rows if float(r["latency_rate"]) < 0.95 * args.rate]
            if slow:
                bad["latency rate"] = f"{min(slow):,.0f}/s in {len(slow)} of {len(rows)} runs"
            check = ("failed" if not rows else
                     "ok" if not any(bad.values()) else
                     " ".join(f"{k}={v}" for k, v in bad.items() if v))
            splits = sorted({r["split"] for r in rows})
            print(f"{n:>4} {who:<6} {','.join(splits) or '-':>7} {fmt(m['delivered_per_s'], ',.0f'):>12} "
                  f"{fmt(ratio, '.2f'):>11} {fmt(m['per_cpu_s'], ',.0f'):>10} {fmt(cpu_ratio, '.2f'):>11} "
                  f"{fmt(m['p50_us'], '.1f'):>8} {fmt(m['p99_us'], '.1f'):>8} "
                  f"{fmt(p99_ratio, '.2f'):>7} {fmt(m['client_cpu'], '.0%'):>5}/{fmt(m['latency_client_cpu'], '.0%'):<4}  "
                  f"{check}")
    print(f"load average at the end {os.getloadavg()[0]:.2f}; medians over the rounds; delivered/s summed over subscribers; split = subscribers on the "
          "publisher's worker / on the other; per cpu-s = messages delivered at full speed per second of server CPU time "
          "(user + system, from /proc); p99 s/r = shoal's p99 over redis's (below 1 is better); client cpu = the client's "
          "share of its core in the throughput window / in the latency phase; check: every message received once, in order, "
          "and counted by PUBLISH, and the latency phase kept its rate")
    for e in errors:
        print(f"error: {e}")


if __name__ == "__main__":
    main()
