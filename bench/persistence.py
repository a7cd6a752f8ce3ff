#!/usr/bin/env python3
"""Persistence: the cost of the log on bulk inserts, and recovery time (issue 7).

Part 1, inserts. Builds release shoal (skip with --no-build), then for each
round starts `shoal serve --workers N` four times, one after the other, each
with a fresh segment and (but for "off") a fresh directory under target/ (the
repository's filesystem, not /dev/shm): persistence off (no --dir),
`--appendfsync no`, `everysec` and `always`. One client (this script, a raw
socket, no redis-py) bulk-inserts rows of the kdb+ trade table shape:

    time  int64  ns since midnight      price  float64
    size  int32                         sym    uint32 (index of ~100 symbols)

each encoded as a fixed 24-byte little-endian row (`<qdiI`), in batches of
10,000 rows; a batch is one pipeline of `RPUSH trade:<sym> row row ...`, one
command per symbol in the batch, rows in time order. Up to --window batches
are in flight. The payloads are built before the clock starts. rows/s and
MB/s (row bytes only) are medians over --rounds; the ratio is to persistence
off in the same run. Beside them, rows per second of server CPU time (the
supervisor, whose threads write the log, and the workers), which holds when
other work on the machine takes CPU from the server. The order of the modes rotates each round, so that
noise from other work on the machine falls on each in turn. After each run
the client checks that the lists hold every row (LLEN).

Part 2, recovery. `everysec`, a fresh directory: about --recovery-gb of
1 KiB string values (SET, pipelined), a BGSAVE once half is loaded, the rest
loaded while it runs; then waits for the snapshot to finish and the log to
be written out, SIGKILLs every shoal process, deletes the segment (what a
reboot does to /dev/shm), starts again on the same directory and measures the
time until the server answers PING. The server's own recovery lines
(snapshot load, log replay, totals) are printed, with the replay rate in
records/s, and a sample of keys is checked.

Targets (issue 7): everysec >= 0.95x persistence off; recovery of 1 GB <= 5 s.
The machine has 2 cores and is shared: nothing is pinned unless asked
(--server-cpus, --client-cpu).

Usage: python3 bench/persistence.py [--rows 2000000] [--rounds 3] [--recovery-gb 1]
                                    [--modes off,no,everysec,always] [--skip-recovery]
                                    [--no-build]
Only the standard library.
"""

import argparse
import os
import random
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import servers

ROW = struct.Struct("<qdiI")
MODES = ["off", "no", "everysec", "always"]


def symbols(n):
    """n ticker-like names: AAA, AAB, ..."""
    out = []
    for i in range(n):
        a, rest = divmod(i, 26 * 26)
        b, c = divmod(rest, 26)
        out.append(bytes([65 + a % 26, 65 + b, 65 + c]))
    return out


def resp(*args):
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(parts)


def trade_batches(rows, batch, nsyms, seed=1):
    """[(payload bytes, commands in it)] for `rows` rows and the row count
    per symbol key."""
    rng = random.Random(seed)
    syms = symbols(nsyms)
    keys = [b"trade:" + s for s in syms]
    prices = [10.0 + 5 * i for i in range(nsyms)]
    t = 34_200_000_000_000  # 09:30 in ns
    per_key = [0] * nsyms
    out = []
    for start in range(0, rows, batch):
        n = min(batch, rows - start)
        by_sym = {}
        for _ in range(n):
            s = rng.randrange(nsyms)
            t += rng.randrange(1, 2000)
            prices[s] += rng.choice((-0.01, 0.0, 0.01))
            by_sym.setdefault(s, []).append(ROW.pack(t, prices[s], rng.randrange(1, 1000) * 100, s))
        cmds = []
        for s, rows_of in by_sym.items():
            cmds.append(resp(b"RPUSH", keys[s], *rows_of))
            per_key[s] += len(rows_of)
        out.append((b"".join(cmds), len(cmds)))
    return out, dict(zip(keys, per_key))


class Shoal:
    """One `shoal serve` with its output collected (the recovery lines)."""

    def __init__(self, args, name, directory, policy, memory):
        self.port = servers.free_port()
        self.name = name
        argv = ([] if not args.server_cpus else ["taskset", "-c", args.server_cpus]) + [
            str(servers.SHOAL_BIN), "serve", "--workers", str(args.workers),
            "--port", str(self.port), "--name", name, "--memory", memory,
            "--memcached-port", "0", "--memcached-udp-port", "0", "--http-port", "0", "--nats-port", "0"]
        if directory is not None:
            argv += ["--dir", str(directory), "--appendfsync", policy]
        self.lines = []
        self.started = time.monotonic()
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        threading.Thread(target=self._drain, daemon=True).start()
        servers.wait_port(self.port, self.proc, "shoal serve", timeout=600)
        self.ready_after = time.monotonic() - self.started

    def _drain(self):
        for line in self.proc.stdout:
            self.lines.append(line.decode(errors="replace").rstrip("\n"))

    def stop(self):
        servers.stop(self.proc)
        servers.remove_segment(self.name)

    def kill_all(self):
        """SIGSTOP the supervisor, then SIGKILL it and every process below it."""
        root = self.proc.pid
        os.kill(root, signal.SIGSTOP)
        tree = descendants(root)
        for pid in tree + [root]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        for pid in tree:
            while Path(f"/proc/{pid}").exists() and \
                    Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                time.sleep(0.01)


def descendants(root):
    parent = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                parent[int(d)] = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                pass
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out += kids
        todo += kids
    return out


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=600)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self):
        self.sock.close()

    def read_lines(self, n):
        """Reads n single-line replies; returns them (bytes, without CRLF)."""
        out = []
        while len(out) < n:
            i = self.buf.find(b"\r\n")
            if i < 0:
                chunk = self.sock.recv(1 << 20)
                if not chunk:
                    raise ConnectionError("server closed the connection")
                self.buf += chunk
                continue
            out.append(self.buf[:i])
            self.buf = self.buf[i + 2:]
        return out

    def count_replies(self, n):
        """Reads n single-line replies fast (":<n>" or "+OK"); fails on an error."""
        seen = 0
        while True:
            lines = self.buf.count(b"\r\n")
            if seen + lines >= n:
                break
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk
        # consume exactly n lines
        pos = 0
        for _ in range(n - seen):
            j = self.buf.index(b"\r\n", pos)
            if self.buf[pos:pos + 1] == b"-":
                raise RuntimeError(f"error reply: {self.buf[pos:j]!r}")
            pos = j + 2
        self.buf = self.buf[pos:]

    def cmd(self, *args):
        """One command; the reply as bytes (a bulk's body, or the line)."""
        self.sock.sendall(resp(*[a if isinstance(a, bytes) else str(a).encode() for a in args]))
        line = self.read_lines(1)[0]
        if line[:1] == b"$":
            n = int(line[1:])
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.buf += self.sock.recv(1 << 20)
            body, self.buf = self.buf[:n], self.buf[n + 2:]
            return body
        if line[:1] == b"-":
            raise RuntimeError(line.decode())
        return line[1:]

    def info(self, section):
        text = self.cmd("INFO", section).decode()
        return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def insert(port, batches, window):
    """Sends every batch, at most `window` unanswered; seconds taken."""
    c = Conn(port)
    try:
        sent = threading.Semaphore(window)
        failure = []
        total_cmds = [n for _, n in batches]

        def receive():
            try:
                for n in total_cmds:
                    c.count_replies(n)
                    sent.release()
            except BaseException as e:  # reported by the sender
                failure.append(e)
                for _ in range(window):
                    sent.release()

        began = time.perf_counter()
        reader = threading.Thread(target=receive)
        reader.start()
        for payload, _ in batches:
            sent.acquire()
            if failure:
                break
            c.sock.sendall(payload)
        reader.join()
        took = time.perf_counter() - began
        if failure:
            raise failure[0]
        return took
    finally:
        c.close()


def check_rows(port, per_key):
    c = Conn(port)
    try:
        for key, n in per_key.items():
            got = int(c.cmd("LLEN", key))
            if got != n:
                return f"{key.decode()} holds {got} rows, not {n}"
        return "ok"
    finally:
        c.close()


def insert_runs(args, work):
    batches, per_key = trade_batches(args.rows, args.batch, args.symbols)
    payload_mb = args.rows * ROW.size / 1e6
    modes = args.modes.split(",")
    got = {m: [] for m in modes}
    checks = {m: set() for m in modes}
    cpu = {m: [] for m in modes}
    for rnd in range(args.rounds):
        order = modes[rnd % len(modes):] + modes[:rnd % len(modes)]
        for mode in order:
            name = f"shoal-bench-persist-{os.getpid()}-{mode}"
            d = None
            if mode != "off":
                d = Path(tempfile.mkdtemp(prefix=f"{mode}-", dir=work))
            s = Shoal(args, name, d, mode, args.memory)
            try:
                cpu_before = servers.cpu_seconds(s.proc.pid)
                took = insert(s.port, batches, args.window)
                cpu[mode].append(servers.cpu_seconds(s.proc.pid) - cpu_before)
                checks[mode].add(check_rows(s.port, per_key))
            finally:
                s.stop()
                if d is not None:
                    shutil.rmtree(d, ignore_errors=True)
            got[mode].append(took)
            print(f"round {rnd + 1} {mode:>8}: {args.rows / took:,.0f} rows/s", file=sys.stderr, flush=True)
    off = statistics.median(got["off"]) if "off" in got else None
    off_cpu = statistics.median(cpu["off"]) if "off" in cpu else None
    head = (f"{'mode':<9} {'rows/s':>12} {'MB/s':>8} {'vs off':>7} {'target':>8} "
            f"{'rows/cpu-s':>11} {'vs off':>7}  check")
    print(head)
    print("-" * len(head))
    for mode in modes:
        t = statistics.median(got[mode])
        c = statistics.median(cpu[mode])
        ratio = off / t if off else None
        cpu_ratio = off_cpu / c if off_cpu and c else None
        target = ">= 0.95" if mode == "everysec" else ""
        print(f"{mode:<9} {args.rows / t:>12,.0f} {payload_mb / t:>8.1f} "
              f"{'-' if ratio is None else format(ratio, '.2f'):>7} {target:>8} "
              f"{args.rows / c if c else 0:>11,.0f} {'-' if cpu_ratio is None else format(cpu_ratio, '.2f'):>7}  "
              f"{','.join(sorted(checks[mode]))}")
    print(f"{args.rows:,} rows of {ROW.size} bytes ({payload_mb:.0f} MB), {args.symbols} symbols, "
          f"batches of {args.batch:,} rows (one pipeline of RPUSH per symbol), {args.window} batches "
          f"in flight, --workers {args.workers}; medians over {args.rounds} rounds; "
          f"rows/cpu-s = rows per second of server CPU time (supervisor with its log writer and "
          f"snapshot threads, and workers; user + system, from /proc); "
          f"load average {os.getloadavg()[0]:.2f}")


def recovery_run(args, work):
    value_size = 1000
    keys = int(args.recovery_gb * 1e9 / value_size)
    batch = 1000
    blob = os.urandom(value_size + 4096)
    name = f"shoal-bench-recovery-{os.getpid()}"
    d = Path(tempfile.mkdtemp(prefix="recovery-", dir=work))
    s = None
    try:
        s = Shoal(args, name, d, "everysec", args.recovery_memory)
        c = Conn(s.port)
        saves = int(c.info("persistence")["rdb_saves"])
        began = time.perf_counter()
        for start in range(0, keys, batch):
            if start == (keys // 2) // batch * batch:
                if c.cmd("BGSAVE") != b"Background saving started":
                    sys.exit("BGSAVE failed")
            n = min(batch, keys - start)
            c.sock.sendall(b"".join(
                resp(b"SET", b"key:%09d" % i, blob[i % 4096:i % 4096 + value_size])
                for i in range(start, start + n)))
            c.count_replies(n)
        load_s = time.perf_counter() - began
        while int(c.info("persistence")["rdb_saves"]) <= saves:
            time.sleep(0.1)
        while True:
            p = c.info("persistence")
            if int(p["shoal_log_written_lsn"]) >= int(p["shoal_log_head_lsn"]):
                break
            time.sleep(0.05)
        used = c.info("memory").get("used_memory", "?")
        c.close()
        files = sorted(d.iterdir())
        snap_bytes = sum(f.stat().st_size for f in files if f.name.startswith("snapshot-"))
        log_bytes = sum(f.stat().st_size for f in files if f.name.startswith("log-"))
        print(f"recovery data: {keys:,} keys of {value_size} bytes loaded in {load_s:.1f} s "
              f"(BGSAVE at half); used_memory {used}; snapshot {snap_bytes / 1e6:,.0f} MB, "
              f"log {log_bytes / 1e6:,.0f} MB in {sum(f.name.startswith('log-') for f in files)} files")
        s.kill_all()
        servers.remove_segment(name)
        s = Shoal(args, name, d, "everysec", args.recovery_memory)
        wall = s.ready_after
        for line in s.lines:
            if line.startswith("shoal:") and "ready" not in line:
                print(f"  server: {line}")
        replay = None
        for line in s.lines:
            m = re.search(r"replayed (\d+) log records \((\d+) bytes, (\d+) files\) in ([\d.]+) s", line)
            if m:
                replay = (int(m.group(1)), float(m.group(4)))
        applied = None
        for line in s.lines:
            m = re.search(r"recovery applied (\d+) records in ([\d.]+) s", line)
            if m:
                applied = (int(m.group(1)), float(m.group(2)))
        c = Conn(s.port)
        sample = random.Random(3).sample(range(keys), 1000)
        bad = sum(c.cmd("GET", b"key:%09d" % i) != blob[i % 4096:i % 4096 + value_size] for i in sample)
        dbsize = int(c.cmd("DBSIZE"))
        c.close()
        print(f"restart to PING: {wall:.2f} s (target <= 5 s for 1 GB)")
        if applied:
            print(f"server recovery: {applied[0]:,} records in {applied[1]:.2f} s = "
                  f"{applied[0] / max(applied[1], 1e-9):,.0f} records/s")
        if replay:
            print(f"log replay: {replay[0]:,} records in {replay[1]:.2f} s = "
                  f"{replay[0] / max(replay[1], 1e-9):,.0f} records/s")
        print(f"after recovery: DBSIZE {dbsize:,} (want {keys:,}); "
              f"{'all 1000 sampled values exact' if not bad else f'{bad} of 1000 sampled values wrong'}")
    finally:
        if s is not None:
            s.stop()
        servers.remove_segment(name)
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--batch", type=int, default=10_000, help="rows per pipeline")
    ap.add_argument("--symbols", type=int, default=100)
    ap.add_argument("--window", type=int, default=2, help="batches in flight")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated, from: " + ",".join(MODES))
    ap.add_argument("--workers", type=int, default=1, help="shoal serve --workers")
    ap.add_argument("--memory", default="1g", help="segment size for the insert runs")
    ap.add_argument("--recovery-gb", type=float, default=1.0)
    ap.add_argument("--recovery-memory", default="4g")
    ap.add_argument("--skip-recovery", action="store_true")
    ap.add_argument("--skip-inserts", action="store_true")
    ap.add_argument("--server-cpus", default="", help="taskset list for shoal; '' = none")
    ap.add_argument("--client-cpu", default="", help="taskset CPU for this client; '' = none")
    ap.add_argument("--no-build", action="store_true")
    args = ap.parse_args()
    for m in args.modes.split(","):
        if m not in MODES:
            ap.error(f"unknown mode {m!r}")
    if args.client_cpu:
        os.sched_setaffinity(0, {int(x) for x in args.client_cpu.split(",")})
    if not args.no_build:
        servers.build_shoal()
    work = Path(tempfile.mkdtemp(prefix="bench-persistence-", dir=servers.REPO / "target"))
    try:
        print(f"shoal {servers.SHOAL_BIN}; directories under {work}; "
              f"load average {os.getloadavg()[0]:.2f}", flush=True)
        if not args.skip_inserts:
            insert_runs(args, work)
        if not args.skip_recovery:
            recovery_run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
