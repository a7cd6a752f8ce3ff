#!/usr/bin/env python3
"""Socket sharding in operation (issue 8): what more workers buy under a load
of slow requests, and how in step `shoal ctl exec` and `shoal bench` start
their processes. Prints figures; asserts nothing.

Part `load` (like the kdb+ paper's sleep(2)/sleep(0.2) tests): for each
balancing mode (--balance, default reuseport,shared) and worker count
(--workers, default 1,2,3) starts `shoal serve`, then --clients (8) client
threads each send `DEBUG SLEEP <--sleep>` (0.02 s, a request that holds its
worker that long) in a loop for --seconds (5). By default each request opens
a new connection, so the balancing mode decides which worker gets every
request (reuseport: the kernel's hash, whether or not that worker is busy;
shared: whichever free worker accepts first); --persistent keeps one
connection per client instead. Prints requests/s and response times (mean,
p50, p90, p99, max, from connect to reply) per mode and worker count, and
plots them to --out (bench/results/sharding.png) with matplotlib.

Part `skew` (like the kdb+ "simultaneous execution" study's table): with 2
workers, `shoal ctl exec -- PING` --runs (20) times in each mode (spin:
every worker spins on CLOCK_MONOTONIC to a target instant; naive: the
command is sent to every worker at once), and `shoal bench skew --runs 20`
(two client processes started by either method, each then sending a PING),
once with each client pinned to a CPU of its own (its default) and once
with --no-pin.
Prints method, average, median, maximum and standard deviation of the skew (latest
start - earliest start) in microseconds.

The server is not pinned: its workers spend the load part asleep, and the
skew part needs a CPU for each worker. The client threads run in this
process.

matplotlib comes from a venv at target/bench-venv, made on first use
(`python3 -m venv`, then pip installs the pinned version); --no-plot skips it.

Usage: python3 bench/sharding.py [--no-build] [--parts load,skew] [--seconds 5]
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import servers

REPO = servers.REPO
SHOAL_BIN = servers.SHOAL_BIN
BENCH_VENV = REPO / "target" / "bench-venv"
MATPLOTLIB = "matplotlib==3.10.3"


def start_shoal(workers, balance):
    """`shoal serve --workers N --balance B` on a free port (RESP only);
    returns (proc, port, name) once it answers PING."""
    port = servers.free_port()
    name = f"shoal-bench-sharding-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    proc = subprocess.Popen(
        [str(SHOAL_BIN), "serve", "--workers", str(workers), "--balance", balance,
         "--port", str(port), "--name", name, "--memory", "64m",
         "--memcached-port", "0", "--memcached-udp-port", "0", "--http-port", "0", "--nats-port", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    servers.wait_port(port, proc, "shoal serve")
    return proc, port, name


def stop_shoal(proc, name):
    servers.stop(proc)
    servers.remove_segment(name)


def command(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def connect(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_ok(s):
    data = b""
    while not data.endswith(b"\r\n"):
        chunk = s.recv(64)
        if not chunk:
            raise ConnectionError("connection closed by the server")
        data += chunk
    if data != b"+OK\r\n":
        raise RuntimeError(f"DEBUG SLEEP answered {data!r}")


def load(port, clients, sleep_s, seconds, persistent):
    """`clients` threads looping DEBUG SLEEP for `seconds`; returns the
    response times (s) of the requests that finished inside the window and
    the window's length."""
    request = command("DEBUG", "SLEEP", sleep_s)
    times, errors = [], []
    start = time.monotonic()
    end = start + seconds

    def client():
        s = connect(port) if persistent else None
        try:
            while time.monotonic() < end:
                t0 = time.monotonic()
                if not persistent:
                    s = connect(port)
                s.sendall(request)
                read_ok(s)
                t1 = time.monotonic()
                if not persistent:
                    s.close()
                if t1 <= end:
                    times.append(t1 - t0)
        except Exception as e:  # reported below; the other clients go on
            errors.append(repr(e))
        finally:
            if s is not None:
                s.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        print(f"  {len(errors)} clients failed: {errors[:3]}")
    return times, seconds


def percentile(sorted_values, p):
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, max(0, round(p / 100 * len(sorted_values)) - 1))
    return sorted_values[i]


def load_part(args):
    rows = []
    print(f"load: {args.clients} clients looping DEBUG SLEEP {args.sleep} for {args.seconds} s, "
          f"{'one connection per client' if args.persistent else 'a new connection per request'}")
    print()
    header = (f"{'balance':<10}{'workers':>8}{'requests':>10}{'req/s':>9}{'mean ms':>10}"
              f"{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}{'max ms':>9}")
    print(header)
    print("-" * len(header))
    for balance in args.balance:
        for workers in args.workers:
            proc, port, name = start_shoal(workers, balance)
            try:
                times, window = load(port, args.clients, args.sleep, args.seconds, args.persistent)
            finally:
                stop_shoal(proc, name)
            ms = sorted(t * 1000 for t in times)
            row = {"balance": balance, "workers": workers, "requests": len(ms),
                   "rps": len(ms) / window, "mean": statistics.fmean(ms) if ms else float("nan"),
                   "p50": percentile(ms, 50), "p90": percentile(ms, 90),
                   "p99": percentile(ms, 99), "max": ms[-1] if ms else float("nan")}
            rows.append(row)
            print(f"{balance:<10}{workers:>8}{row['requests']:>10}{row['rps']:>9.1f}"
                  f"{row['mean']:>10.1f}{row['p50']:>9.1f}{row['p90']:>9.1f}{row['p99']:>9.1f}"
                  f"{row['max']:>9.1f}", flush=True)
    ideal = 1 / args.sleep
    print(f"\n(one worker can serve at most {ideal:.0f} requests/s of {args.sleep * 1000:.0f} ms;"
          f" {args.clients} clients on one worker wait about {args.clients * args.sleep * 1000:.0f}"
          " ms each)")
    return rows


def plot(rows, args):
    """Two panels: requests/s and response time (mean and p99) against
    workers, a line per balancing mode."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for n, balance in enumerate(args.balance):
        mine = [r for r in rows if r["balance"] == balance]
        w = [r["workers"] for r in mine]
        color = f"C{n}"
        left.plot(w, [r["rps"] for r in mine], marker="o", color=color, label=balance)
        right.plot(w, [r["mean"] for r in mine], marker="o", color=color,
                   label=f"{balance} mean")
        right.plot(w, [r["p99"] for r in mine], marker="x", linestyle="--", color=color,
                   label=f"{balance} p99")
    for ax in (left, right):
        ax.set_xlabel("workers")
        ax.set_xticks(args.workers)
        ax.grid(True, alpha=0.3)
        ax.legend()
    left.set_ylabel("requests/s")
    left.set_title(f"{args.clients} clients, DEBUG SLEEP {args.sleep}")
    right.set_ylabel("response time (ms)")
    right.set_title("response time" + (" (new connection per request)"
                                      if not args.persistent else ""))
    left.set_ylim(bottom=0)
    right.set_ylim(bottom=0)
    fig.tight_layout()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    print(f"plot: {out}")


def stats(values):
    """avg, median, max, sample standard deviation."""
    return (statistics.fmean(values), statistics.median(values), max(values),
            statistics.stdev(values) if len(values) > 1 else 0.0)


def skew_part(args):
    proc, port, name = start_shoal(2, "reuseport")
    table = []
    try:
        skews = {"spin": [], "naive": []}
        for _ in range(args.runs):
            for mode in ("spin", "naive"):
                argv = [str(SHOAL_BIN), "ctl", "--name", name, "exec", "--json"]
                if mode == "naive":
                    argv.append("--naive")
                out = subprocess.run(argv + ["--", "PING"], capture_output=True, text=True,
                                     check=True).stdout
                reply = json.loads(out)
                skews[mode].append(reply["max_skew_us"])
        for mode in ("spin", "naive"):
            table.append((f"ctl exec, 2 workers, {mode}", *stats(skews[mode])))
        for pin in ([], ["--no-pin"]):
            out = subprocess.run([str(SHOAL_BIN), "bench", "skew", "--runs", str(args.runs),
                                  "--server", str(port), "--json", *pin],
                                 capture_output=True, text=True, check=True).stdout
            bench = json.loads(out)
            pinned = ", pinned" if bench.get("pinned") else ""
            for row in bench["rows"]:
                table.append((f"bench skew, {bench['clients']} clients{pinned}, {row['method']}",
                              row["avg_us"], row["median_us"], row["max_us"],
                              row["stddev_us"]))
    finally:
        stop_shoal(proc, name)
    print(f"start skew over {args.runs} runs (latest start - earliest start):")
    print()
    header = f"{'method':<52}{'avg us':>9}{'median us':>11}{'max us':>9}{'stddev us':>11}"
    print(header)
    print("-" * len(header))
    for method, avg, median, mx, sd in table:
        print(f"{method:<52}{avg:>9.2f}{median:>11.2f}{mx:>9.2f}{sd:>11.2f}")


def ensure_matplotlib():
    """Re-runs this script under target/bench-venv's Python (made and given
    matplotlib on first use) unless matplotlib imports already."""
    try:
        import matplotlib  # noqa: F401
        return
    except ImportError:
        pass
    python = BENCH_VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(BENCH_VENV)], check=True)
    if subprocess.run([str(python), "-c", "import matplotlib"],
                      stderr=subprocess.DEVNULL).returncode != 0:
        subprocess.run([str(python), "-m", "pip", "install", "--quiet",
                        "--disable-pip-version-check", MATPLOTLIB], check=True)
    os.execv(str(python), [str(python), *sys.argv])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--parts", default="load,skew")
    ap.add_argument("--workers", default="1,2,3")
    ap.add_argument("--balance", default="reuseport,shared")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--sleep", type=float, default=0.02)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--persistent", action="store_true")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "sharding.png"))
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args()
    args.workers = [int(w) for w in args.workers.split(",")]
    args.balance = args.balance.split(",")
    parts = args.parts.split(",")
    if "load" in parts and not args.no_plot:
        ensure_matplotlib()
    if not args.no_build:
        servers.build_shoal()
    if "load" in parts:
        rows = load_part(args)
        if not args.no_plot:
            plot(rows, args)
        print()
    if "skew" in parts:
        skew_part(args)


if __name__ == "__main__":
    main()
