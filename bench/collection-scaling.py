#!/usr/bin/env python3
"""How the cost of one collection operation grows with the collection's size,
redis-server 7.0 and `shoal serve --workers 1` side by side, in one run.

Starts the servers as redis-vs-shoal.py does (free ports, pinned to CPU 0;
this client runs on CPU 1). For each size (10, 1k, 100k, 1M) and each server:
fills a zset, a list, a hash and a set of that many elements (1,000 elements
per ZADD/RPUSH/HSET/SADD, 100 such commands per round trip; the time each
fill took is printed), then times pipelines of --pipeline (1,000) commands on one
connection per server, --batches (6) of each operation on each server in
turn, for --rounds (5) rounds, and prints the median time per command in
microseconds:

  ZADD new+ZREM   ZADD of a member not in the zset, then ZREM of it, alternating
                  (so the zset keeps its size); the time is per command
  ZADD existing   ZADD of a random existing member with a random new score
  ZRANK           ZRANK of a random existing member
  LINDEX middle   LINDEX of index size/2
  HGET            HGET of a random existing field
  SISMEMBER       SISMEMBER of a random member

The commands are encoded before the clock starts and sent as raw RESP, so the
time is nearly all the server's: parsing, executing, replying, and its share
of the socket calls and of one round trip per pipeline (redis-py would add
about 10 us of its own per command, more than most of these operations cost).
The last column, 1M/1k, is the 1,000,000 figure over the 1,000 figure: about 1
for an O(1) operation that stays in cache, more when the operation walks the
collection or misses the CPU caches. A cell reads n/a when the server replied
with an error (e.g. ERR unknown command while shoal lacks the command); the
errors are listed under the table.

Needs redis-server and taskset; only the standard library.
Usage: python3 bench/collection-scaling.py [--sizes 10,1k,100k,1M] [--servers redis,shoal]
"""

import argparse
import itertools
import os
import random
import socket
import statistics
import time

import servers

SIZES = [10, 1000, 100_000, 1_000_000]
SERVERS = ["redis", "shoal"]
KEYS = {"zset": "scale:zset", "list": "scale:list", "hash": "scale:hash", "set": "scale:set"}
FILL_CHUNK = 1000  # elements per fill command
FILL_BATCH = 100  # fill commands per round trip
END = b"collection-scaling-end"  # ECHOed after every batch: its reply marks the end of the replies
END_REPLY = b"$%d\r\n%s\r\n" % (len(END), END)


class ErrorReply(Exception):
    pass


def bulk(arg):
    arg = arg if isinstance(arg, bytes) else str(arg).encode()
    return b"$%d\r\n%s\r\n" % (len(arg), arg)


def command(*args):
    """One command in RESP, the way every client sends it."""
    return b"*%d\r\n" % len(args) + b"".join(bulk(arg) for arg in args)


class Connection:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.end = command("ECHO", END)

    def roundtrip(self, payload):
        """Sends commands (bytes), waits for all their replies; raises ErrorReply
        with the first error reply among them. Returns the replies."""
        buf = bytearray()
        try:
            self.sock.sendall(payload + self.end)
            while not buf.endswith(END_REPLY):
                chunk = self.sock.recv(1 << 20)
                if not chunk:
                    raise ErrorReply("connection closed by the server")
                buf += chunk
        except OSError as e:
            raise ErrorReply(f"connection: {e}") from e
        replies = bytes(buf[:-len(END_REPLY)])
        # Our values never start with '-', so a '-' at the start of a reply is an error.
        if replies.startswith(b"-"):
            at = 0
        else:
            at = replies.find(b"\r\n-")
            at = at + 2 if at >= 0 else -1
        if at >= 0:
            message = replies[at + 1:replies.index(b"\r\n", at)].decode(errors="replace")
            # "ERR unknown command 'ZADD'" without the arguments Redis quotes after it.
            raise ErrorReply(message.split(", with args beginning with")[0])
        return replies

    def call(self, *args):
        return self.roundtrip(command(*args))

    def close(self):
        self.sock.close()


# Element i of every collection is named with 9 decimal digits (m000000042 in
# the zset and the set, field f000000042 and value v000000042 in the hash,
# v000000042 in the list; score 42 in the zset), so that one bytes template
# encodes all the arguments an element adds to a fill command: a 1M fill then
# spends its time in the server, not in Python.
def element(prefix, i):
    return f"{prefix}{i:09d}"


# Collection kind -> (the command that fills it, the RESP of the arguments
# element i adds as a template of i, how many arguments that is, the command
# that counts the elements).
FILL = {
    "zset": ("ZADD", b"$9\r\n%09d\r\n$10\r\nm%09d\r\n", 2, "ZCARD"),
    "list": ("RPUSH", b"$10\r\nv%09d\r\n", 1, "LLEN"),
    "hash": ("HSET", b"$10\r\nf%09d\r\n$10\r\nv%09d\r\n", 2, "HLEN"),
    "set": ("SADD", b"$10\r\nm%09d\r\n", 1, "SCARD"),
}


def fill(conn, kind, size):
    """Fills KEYS[kind] with `size` elements; returns the seconds it took."""
    cmd, template, per_element, count = FILL[kind]
    key = KEYS[kind]
    start = time.perf_counter()
    for first in range(0, size, FILL_CHUNK * FILL_BATCH):
        payload = []
        for lo in range(first, min(first + FILL_CHUNK * FILL_BATCH, size), FILL_CHUNK):
            hi = min(lo + FILL_CHUNK, size)
            payload.append(b"*%d\r\n" % (2 + per_element * (hi - lo)) + bulk(cmd) + bulk(key))
            payload += [template % ((i,) * per_element) for i in range(lo, hi)]
        conn.roundtrip(b"".join(payload))
    took = time.perf_counter() - start
    got = conn.call(count, key)
    if got != b":%d\r\n" % size:
        raise ErrorReply(f"{count} {key} replied {got!r} after filling {size} elements")
    return took


new_members = itertools.count()


def zadd_new(size, rng):
    member = f"new{next(new_members)}"
    return [["ZADD", KEYS["zset"], rng.randrange(size), member], ["ZREM", KEYS["zset"], member]]


# Row label -> (the collection it reads, a function of (size, rng) giving the
# commands of one step, mostly one).
OPS = {
    "ZADD new+ZREM": ("zset", zadd_new),
    "ZADD existing": ("zset", lambda size, rng: [["ZADD", KEYS["zset"], rng.randrange(size),
                                                 element("m", rng.randrange(size))]]),
    "ZRANK": ("zset", lambda size, rng: [["ZRANK", KEYS["zset"], element("m", rng.randrange(size))]]),
    "LINDEX middle": ("list", lambda size, rng: [["LINDEX", KEYS["list"], size // 2]]),
    "HGET": ("hash", lambda size, rng: [["HGET", KEYS["hash"], element("f", rng.randrange(size))]]),
    "SISMEMBER": ("set", lambda size, rng: [["SISMEMBER", KEYS["set"], element("m", rng.randrange(size))]]),
}


def time_pipelines(conn, step, size, rng, batches, pipeline):
    """Seconds per command of each of `batches` pipelines of about `pipeline`
    commands, after one more pipeline to warm up."""
    payloads = []
    for _ in range(batches + 1):
        cmds = []
        while len(cmds) < pipeline:
            cmds += [command(*args) for args in step(size, rng)]
        payloads.append((b"".join(cmds), len(cmds)))
    per_command = []
    for payload, n in payloads:
        start = time.perf_counter()
        conn.roundtrip(payload)
        per_command.append((time.perf_counter() - start) / n)
    return per_command[1:]


def fill_all(conn, size, errors):
    """Replaces the four collections with ones of `size` elements; returns
    {kind: seconds the fill took, or None if the server refused it}."""
    conn.call("DEL", *KEYS.values())
    fills = {}
    for kind in FILL:
        try:
            fills[kind] = fill(conn, kind, size)
        except ErrorReply as e:
            fills[kind] = None
            errors.add(str(e))
    return fills


def run_size(ports, size, args, errors):
    """Fills every server's collections to `size`, then measures in --rounds
    rounds, each timing --batches pipelines of every operation on every
    server in turn, so that noise from other work on the machine spreads
    over all the cells. Returns {(server, op): us per command, or None}."""
    conns = {who: Connection(port) for who, port in ports.items()}
    try:
        fills = {}
        for who, conn in conns.items():
            fills[who] = fill_all(conn, size, errors[who])
            took = ", ".join(f"{kind} " + (f"{s:.2f} s" if s is not None else "n/a")
                             for kind, s in fills[who].items())
            print(f"{who:<5} {size_label(size):>5}: filled {took}", flush=True)
        # The same random members for every server.
        rngs = {who: random.Random(args.seed) for who in conns}
        times = {}  # (server, op) -> seconds per command of each pipeline, or None on an error
        for who in conns:
            for op, (kind, _) in OPS.items():
                times[(who, op)] = [] if fills[who][kind] is not None else None
        for _ in range(args.rounds):
            for who, conn in conns.items():
                for op, (_, step) in OPS.items():
                    if times[(who, op)] is None:
                        continue
                    try:
                        times[(who, op)] += time_pipelines(conn, step, size, rngs[who],
                                                           args.batches, args.pipeline)
                    except ErrorReply as e:
                        times[(who, op)] = None
                        errors[who].add(str(e))
        for conn in conns.values():
            try:
                conn.call("DEL", *KEYS.values())
            except ErrorReply:
                pass  # already listed: the connection failed during the measurement
        return {key: statistics.median(t) * 1e6 if t else None for key, t in times.items()}
    finally:
        for conn in conns.values():
            conn.close()


def parse_size(text):
    text = text.strip().lower()
    scale = {"k": 1000, "m": 1_000_000}.get(text[-1:], 1)
    return int(text.rstrip("km")) * scale


def size_label(n):
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,1k,100k,1M", help="comma-separated; k and M suffixes allowed")
    ap.add_argument("--servers", default=",".join(SERVERS),
                    help="comma-separated, from: redis,shoal (default: both)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds over every server and operation")
    ap.add_argument("--batches", type=int, default=6,
                    help="timed pipelines per operation, server and size in each round")
    ap.add_argument("--pipeline", type=int, default=1000, help="commands per pipeline")
    ap.add_argument("--shoal-memory", default="2g", help="shoal serve --memory")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-build", action="store_true")
    args = ap.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    if not all(0 < size < 10**9 for size in sizes):
        ap.error("sizes run from 1 to 999,999,999 (elements are named with 9 digits)")
    run = args.servers.split(",")
    for who in run:
        if who not in SERVERS:
            ap.error(f"unknown server {who!r}; known: {','.join(SERVERS)}")

    if "shoal" in run and not args.no_build:
        servers.build_shoal()
    ports = {who: servers.free_port() for who in run}
    segment = f"shoal-scaling-{os.getpid()}"
    procs = []
    results = {}  # (server, op, size) -> us per command, or None
    errors = {who: set() for who in run}
    try:
        if "redis" in run:
            procs.append(servers.start_redis(ports["redis"]))
        if "shoal" in run:
            procs.append(servers.start_shoal(ports["shoal"], segment, args.shoal_memory))
        os.sched_setaffinity(0, {int(servers.CLIENT_CPU)})
        started = []
        if "redis" in run:
            started.append(f"redis-server {servers.redis_version()} on :{ports['redis']}")
        if "shoal" in run:
            started.append(f"shoal --workers 1 --memory {args.shoal_memory} on :{ports['shoal']}")
        print(f"{', '.join(started)}, on CPU {servers.SERVER_CPU}; this client on CPU "
              f"{servers.CLIENT_CPU}; {args.rounds} rounds of {args.batches} pipelines of "
              f"{args.pipeline} commands per operation and size", flush=True)

        for size in sizes:
            for (who, op), us in run_size(ports, size, args, errors).items():
                results[(who, op, size)] = us
    finally:
        for proc in procs:
            servers.stop(proc)
        servers.remove_segment(segment)

    print()
    head = f"{'us/op':<14} {'server':<6}" + "".join(f"{size_label(s):>9}" for s in sizes) + f"{'1M/1k':>9}"
    print(head)
    print("-" * len(head))
    for op in OPS:
        for who in run:
            cells = [results[(who, op, s)] for s in sizes]
            line = f"{op if who == run[0] else '':<14} {who:<6}"
            line += "".join(f"{c:>9.3f}" if c is not None else f"{'n/a':>9}" for c in cells)
            small, big = results.get((who, op, 1000)), results.get((who, op, 1_000_000))
            line += f"{big / small:>9.2f}" if small and big else f"{'-':>9}"
            print(line)
    print("microseconds per command, median over the pipelines; 1M/1k = the 1,000,000 figure "
          "over the 1,000 one; n/a = the server replied with an error")
    for who in run:
        for e in sorted(errors[who]):
            print(f"{who}: {e}")


if __name__ == "__main__":
    main()
