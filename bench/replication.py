#!/usr/bin/env python3
"""Replication: what one replica costs the primary's ingest (issue 21).

Builds release shoal (skip with --no-build). For each round, two modes one
after the other, the order rotating each round: the primary alone
(`shoal serve --dir DIR --appendfsync everysec`) and the same primary with
one replica attached (`shoal serve --replicaof 127.0.0.1:PORT`, which
follows the primary's log and applies it to its own segment). Each mode
gets fresh segments and a fresh directory under target/. redis-benchmark
then runs SET and HSET at pipeline 16 (`-c 50 -r 100000 -P 16 -n
--requests`) against the primary. With the replica, the script then waits
until the replica has applied the primary's whole log and prints how long
that took after the benchmark ended (how far behind the replica was).

Printed: requests/s of each mode (medians over --rounds) and the ratio
with a replica / alone, which the issue wants at 0.97 or more; beside it
the primary's CPU microseconds per request in each mode (user + system of
its supervisor, which sends the log to the replica, and its worker, from
/proc) and their ratio alone / with a replica, the "per core" figure: the
machine has 2 cores and is shared, and the replica competes with the
primary for them, so requests/s with a replica is a lower bound of what
separate hosts would see, while the primary's own CPU per request is what
the replica costs it wherever the replica runs.

`--pin` puts the primary on CPU 0 and the replica with redis-benchmark on
CPU 1 for the ingest part, as if the replica had a host of its own: the
primary's core then pays only what the sending costs it.

Then three timings:
- FAILOVER: a primary and a replica (both with --dir) holding the keys of
  a SET benchmark (--failover-keys requests); `FAILOVER TO` the replica,
  then a SET sent to the replica over and over until it is accepted: the
  time from FAILOVER to that first accepted write, and to the old
  primary's link to the new one being up (its partial resync).
- Promotion after a crash: the same pair; every primary process is
  SIGKILLed, then `REPLICAOF NO ONE` and a SET sent to the replica over
  and over: the time from the kill to the first accepted write.
- Full sync: a primary filled with about --full-sync-mb MiB of 1 KiB
  values (redis-benchmark SET), then a new replica started: the time from
  its start to its link being up with the primary's whole log applied.

Usage: python3 bench/replication.py [--requests 2000000] [--rounds 3] [--failover-keys 200000]
                                   [--full-sync-mb 1024] [--pin] [--no-build]
Only the standard library.
"""

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid

import servers


def info(port, section):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"*2\r\n$4\r\nINFO\r\n$%d\r\n%s\r\n" % (len(section), section.encode()))
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            head, _, rest = data.partition(b"\r\n")
            if head.startswith(b"$") and len(rest) >= int(head[1:]):
                break
    out = {}
    for line in data.decode(errors="replace").splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v
    return out


def start(argv, port):
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    servers.wait_port(port, proc, "shoal serve", timeout=60)
    return proc


def shoal_argv(port, name, extra):
    return [str(servers.SHOAL_BIN), "serve", "--workers", "1", "--port", str(port),
            "--name", name, "--memory", "1g", "--memcached-port", "0",
            "--memcached-udp-port", "0", "--http-port", "0", "--nats-port", "0", *extra]


# `--pin`: the primary on CPU 0, the replica and redis-benchmark on CPU 1
# (as if the replica ran on a host of its own); empty: nothing pinned.
PIN = {"primary": [], "replica": [], "client": []}


def pinned(role, argv):
    return PIN[role] + argv


def benchmark(port, test, requests):
    out = subprocess.run(
        PIN["client"] + ["redis-benchmark", "-p", str(port), "-c", "50", "-r", "100000", "-P", "16",
         "-n", str(requests), "-t", test, "--csv"],
        capture_output=True, text=True, check=True).stdout
    last = [line for line in out.splitlines() if line.strip()][-1]
    return float(last.split(",")[1].strip('"'))


def run_mode(args, with_replica, scratch):
    """{test: requests/s}, the replica's catch-up seconds per test and
    {test: the primary's CPU microseconds per request} (its supervisor,
    which sends to the replica, and its worker, from /proc)."""
    tag = uuid.uuid4().hex[:8]
    directory = scratch / f"primary-{tag}"
    port = servers.free_port()
    names = [f"bench-repl-p-{tag}"]
    procs = [start(pinned("primary", shoal_argv(port, names[0], ["--dir", str(directory)])),
                   port)]
    replica_port = None
    try:
        if with_replica:
            replica_port = servers.free_port()
            names.append(f"bench-repl-r-{tag}")
            procs.append(start(pinned("replica", shoal_argv(
                replica_port, names[1], ["--replicaof", f"127.0.0.1:{port}"])), replica_port))
            deadline = time.monotonic() + 30
            while info(replica_port, "replication").get("master_link_status") != "up":
                if time.monotonic() > deadline:
                    sys.exit("the replica did not connect")
                time.sleep(0.05)
        rates, catch_up, cpu = {}, {}, {}
        for test in args.tests.split(","):
            before = servers.cpu_seconds(procs[0].pid)
            rates[test] = benchmark(port, test, args.requests)
            cpu[test] = (servers.cpu_seconds(procs[0].pid) - before) / args.requests * 1e6
            if with_replica:
                ended = time.monotonic()
                head = int(info(port, "replication")["master_repl_offset"])
                while int(info(replica_port, "replication")["slave_repl_offset"]) < head:
                    if time.monotonic() - ended > 120:
                        sys.exit("the replica did not catch up in 120 s")
                    time.sleep(0.01)
                catch_up[test] = time.monotonic() - ended
        return rates, catch_up, cpu
    finally:
        cleanup(procs, names, [directory])


def command(port, *args):
    """One command's first reply line (a fresh connection)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        req = b"*%d\r\n" % len(args)
        for a in args:
            a = str(a).encode()
            req += b"$%d\r\n%s\r\n" % (len(a), a)
        s.sendall(req)
        data = b""
        while b"\r\n" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return data.split(b"\r\n", 1)[0].decode(errors="replace")


def caught_up_pair(args, scratch, prefix):
    """A primary and a replica (both with --dir) holding the keys of a SET
    benchmark (--failover-keys requests), the replica caught up with it:
    (ports, procs, names, dirs), which the caller cleans up."""
    tag = uuid.uuid4().hex[:8]
    dirs = [scratch / f"{prefix}-p-{tag}", scratch / f"{prefix}-r-{tag}"]
    ports = [servers.free_port(), servers.free_port()]
    names = [f"bench-{prefix}-p-{tag}", f"bench-{prefix}-r-{tag}"]
    procs = [start(shoal_argv(ports[0], names[0], ["--dir", str(dirs[0])]), ports[0])]
    try:
        procs.append(start(shoal_argv(ports[1], names[1], [
            "--dir", str(dirs[1]), "--replicaof", f"127.0.0.1:{ports[0]}"]), ports[1]))
        if args.failover_keys:
            benchmark(ports[0], "set", args.failover_keys)
        if command(ports[0], "WAIT", 1, 60000) != ":1":
            sys.exit("the replica did not catch up")
    except BaseException:
        cleanup(procs, names, dirs)
        raise
    return ports, procs, names, dirs


def failover_switch(args, scratch):
    """Seconds from FAILOVER to the first write the new primary accepts,
    and to the old primary's link to it being up."""
    ports, procs, names, dirs = caught_up_pair(args, scratch, "fo")
    try:
        began = time.monotonic()
        if command(ports[0], "FAILOVER", "TO", "127.0.0.1", ports[1]) != "+OK":
            sys.exit("FAILOVER refused")
        while command(ports[1], "SET", "after-failover", 1) != "+OK":
            if time.monotonic() - began > 60:
                sys.exit("the replica did not take over in 60 s")
        accepted = time.monotonic() - began
        while info(ports[0], "replication").get("master_link_status") != "up":
            if time.monotonic() - began > 120:
                sys.exit("the old primary did not follow the new one in 120 s")
            time.sleep(0.001)
        return accepted, time.monotonic() - began
    finally:
        cleanup(procs, names, dirs)


def cleanup(procs, names, dirs):
    for p in reversed(procs):
        servers.stop(p)
    for n in names:
        servers.remove_segment(n)
        for suffix in (".ctl", ".repl"):
            try:
                (servers.Path("/dev/shm") / f"{n}{suffix}").unlink()
            except FileNotFoundError:
                pass
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)


def kill_tree(proc):
    """SIGKILL a shoal supervisor and its workers (stopped first, so it
    cannot start a replacement): the primary's machine is gone."""
    proc.send_signal(signal.SIGSTOP)
    children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                              text=True).stdout.split()
    for pid in [proc.pid, *map(int, children)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def promote_after_kill(args, scratch):
    """Seconds from the SIGKILL of every primary process to the first write
    the replica accepts after `REPLICAOF NO ONE` (what an operator's or a
    supervisor's failover does without Sentinel)."""
    ports, procs, names, dirs = caught_up_pair(args, scratch, "pr")
    try:
        began = time.monotonic()
        kill_tree(procs[0])
        if command(ports[1], "REPLICAOF", "NO", "ONE") != "+OK":
            sys.exit("REPLICAOF NO ONE refused")
        while command(ports[1], "SET", "after-promotion", 1) != "+OK":
            if time.monotonic() - began > 60:
                sys.exit("the replica did not take writes in 60 s")
        return time.monotonic() - began
    finally:
        cleanup(procs, names, dirs)


def full_sync(args, scratch):
    """(bytes, seconds): a primary holding about --full-sync-mb of 1 KiB
    values (and its log), then a new replica started: the time from its
    start to its link being up with the primary's whole log applied."""
    tag = uuid.uuid4().hex[:8]
    dirs = [scratch / f"sync-p-{tag}"]
    port = servers.free_port()
    names = [f"bench-fs-p-{tag}", f"bench-fs-r-{tag}"]
    memory = f"{max(2, args.full_sync_mb * 3 // 1024 + 1)}g"
    argv = shoal_argv(port, names[0], ["--dir", str(dirs[0])])
    argv[argv.index("--memory") + 1] = memory
    procs = [start(argv, port)]
    try:
        # Random keys: three times as many requests as keys sets about 95%
        # of them; a 1 KiB value takes about 1.1 KiB with its entry.
        keys = args.full_sync_mb * 1024 * 1024 // 1024
        subprocess.run(["redis-benchmark", "-p", str(port), "-c", "50", "-P", "16",
                        "-n", str(3 * keys), "-r", str(keys), "-d", "1024", "-t", "set", "-q"],
                       check=True, stdout=subprocess.DEVNULL)
        size = int(info(port, "memory")["used_memory"])
        head = int(info(port, "replication")["master_repl_offset"])
        replica_port = servers.free_port()
        rargv = shoal_argv(replica_port, names[1], ["--replicaof", f"127.0.0.1:{port}"])
        rargv[rargv.index("--memory") + 1] = memory
        began = time.monotonic()
        procs.append(start(rargv, replica_port))
        while True:
            link = info(replica_port, "replication")
            if link.get("master_link_status") == "up" and \
                    int(link.get("slave_repl_offset", 0)) >= head:
                break
            if time.monotonic() - began > 600:
                sys.exit("the replica did not finish its full sync in 600 s")
            time.sleep(0.01)
        return size, time.monotonic() - began
    finally:
        cleanup(procs, names, dirs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=2_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tests", default="set,hset")
    ap.add_argument("--failover-keys", type=int, default=200_000)
    ap.add_argument("--full-sync-mb", type=int, default=1024,
                    help="size of the dataset the full-sync timing sends (0: skip it)")
    ap.add_argument("--pin", action="store_true",
                    help="primary on CPU 0, replica and redis-benchmark on CPU 1 "
                         "(the ingest part only)")
    ap.add_argument("--no-build", action="store_true")
    args = ap.parse_args()
    if not args.no_build:
        servers.build_shoal()
    if args.pin:
        PIN.update(primary=["taskset", "-c", "0"], replica=["taskset", "-c", "1"],
                   client=["taskset", "-c", "1"])
    scratch = servers.REPO / "target" / "bench-replication"
    scratch.mkdir(parents=True, exist_ok=True)
    alone, replicated, lags, cpu_alone, cpu_replicated = [], [], [], [], []
    for r in range(args.rounds):
        order = [False, True] if r % 2 == 0 else [True, False]
        for with_replica in order:
            rates, catch_up, cpu = run_mode(args, with_replica, scratch)
            (replicated if with_replica else alone).append(rates)
            (cpu_replicated if with_replica else cpu_alone).append(cpu)
            if with_replica:
                lags.append(catch_up)
    print(f"{'test':<6} {'alone req/s':>14} {'1 replica req/s':>16} {'ratio':>7} "
          f"{'alone us/req':>13} {'1 replica us/req':>17} {'per core':>9} "
          f"{'replica caught up after':>24}")
    for test in args.tests.split(","):
        a = statistics.median(x[test] for x in alone)
        b = statistics.median(x[test] for x in replicated)
        ca = statistics.median(x[test] for x in cpu_alone)
        cb = statistics.median(x[test] for x in cpu_replicated)
        lag = statistics.median(x[test] for x in lags)
        print(f"{test:<6} {a:>14,.0f} {b:>16,.0f} {b / a:>7.3f} {ca:>13.2f} {cb:>17.2f} "
              f"{ca / cb:>9.3f} {lag:>22.3f} s")
    accepted, followed = failover_switch(args, scratch)
    print(f"FAILOVER: first write accepted by the new primary after {accepted * 1000:.1f} ms, "
          f"old primary following it after {followed * 1000:.1f} ms")
    accepted = promote_after_kill(args, scratch)
    print(f"SIGKILL of the primary, REPLICAOF NO ONE on the replica: first write accepted "
          f"after {accepted * 1000:.1f} ms")
    if args.full_sync_mb:
        size, secs = full_sync(args, scratch)
        print(f"full sync: {size / 2**20:,.0f} MiB of keys (the primary's used_memory) "
              f"to a new replica in {secs:.2f} s ({size / 2**20 / secs:,.0f} MiB/s)")

if __name__ == "__main__":
    main()
