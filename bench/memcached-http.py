#!/usr/bin/env python3
"""memcached 1.6 and nginx against shoal, side by side, in one run.

memcached part: `memcached -t 1` and `shoal serve --workers 1` (both pinned to
CPU 0, TCP only) under memcaslap pinned to CPU 1 (`-T 1 -c 50`, --seconds per
run): pure set, pure get, and multiget of 10 keys (`-d 10`), each with 3-byte
and 128-byte values and 16-byte keys. memcaslap loads the keys before a get
run (`-w 1k`: 50,000 keys). It reports operations per second (for multiget,
keys per second), its totals of gets and sets, and a log2 latency histogram, from which the p99 bucket is printed as its upper
bound ("<=1024us": the 99th percentile lies in [512us, 1024us)).

HTTP part: nginx (one worker process, `open_file_cache`, `access_log off`,
keep-alive without a request cap) serving a 42-byte index.html from a
directory, against shoal's HTTP port answering `GET /index.html` from the key
`index.html`, under `wrk -t1 -c50 --latency` pinned to CPU 1; requests/s and
p50/p99 latency.

Each case alternates the reference server and shoal (--rounds pairs) so that
noise from other work falls on both; the table shows means over the rounds
and the ratio shoal / reference, twice: operations per second, and operations
per second of server CPU time (user + system of the server's processes, from
/proc, so "per core" holds even when the one-core client is the limit). Needs memcached, memcaslap
(libmemcached-tools), nginx, wrk and taskset; only the standard library.

Usage: python3 bench/memcached-http.py [--seconds S] [--rounds R]
                                       [--parts memcached,http] [--no-build]
"""

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import servers

VALUE_SIZES = [3, 128]
# Case name -> (share of sets, share of gets, keys per get).
MEMCACHED_CASES = {
    "set": (1.0, 0.0, 1),
    "get": (0.0, 1.0, 1),
    "multiget10": (0.0, 1.0, 10),
}
INDEX_HTML = b"<html><body>hello from shoal</body></html>"
assert len(INDEX_HTML) == 42


def measured(proc, run):
    """Runs `run()`, which returns (ops/s, an extra figure, every operation the
    server did for it); returns (ops/s, the extra figure, operations per
    second of server CPU time)."""
    before = servers.cpu_seconds(proc.pid)
    rate, extra, total = run()
    used = servers.cpu_seconds(proc.pid) - before
    return rate, extra, (total / used if used > 0 else None)


def memcaslap(port, case, size, seconds, workdir):
    """One memcaslap run; returns (ops/s, p99 upper bound in us or None, every
    get and set it sent, its loading of the keys included)."""
    set_share, get_share, keys = MEMCACHED_CASES[case]
    cfg = Path(workdir) / f"{case}-{size}.cfg"
    cfg.write_text(f"key\n16 16 1\nvalue\n{size} {size} 1\ncmd\n0 {set_share}\n1 {get_share}\n")
    out = subprocess.run(
        ["taskset", "-c", servers.CLIENT_CPU, "memcaslap", "-s", f"127.0.0.1:{port}",
         "-T", "1", "-c", "50", "-t", f"{seconds}s", "-F", str(cfg), "-X", str(size),
         "-d", str(keys), "-S", f"{seconds}s", "-w", "1k"],
        capture_output=True, text=True, timeout=seconds * 10 + 60).stdout
    m = re.search(r"Run time: [\d.]+s Ops: \d+ TPS: (\d+)", out)
    gets, sets = re.search(r"^cmd_get: (\d+)", out, re.M), re.search(r"^cmd_set: (\d+)", out, re.M)
    if not (m and gets and sets):
        sys.exit(f"memcaslap printed no figures:\n{out}")
    return int(m.group(1)), p99_of_log2(out), int(gets.group(1)) + int(sets.group(1))


def p99_of_log2(out):
    """The upper bound of the log2 bucket holding the 99th percentile, from
    memcaslap's last "Log2 Dist" block (rows `N: c0 c1 c2 c3` count latencies
    whose floor(log2(us)) is N, N+1, N+2, N+3)."""
    blocks = out.split("Log2 Dist:")
    if len(blocks) < 2:
        return None
    buckets = []
    for line in blocks[-1].splitlines()[1:]:
        m = re.match(r"\s*(\d+):((?:\s+\d+)+)\s*$", line)
        if not m:
            break
        base = int(m.group(1))
        for i, count in enumerate(m.group(2).split()):
            buckets.append((base + i, int(count)))
    total = sum(c for _, c in buckets)
    if total == 0:
        return None
    seen = 0
    for exp, count in buckets:
        seen += count
        if seen >= 0.99 * total:
            return 2 ** (exp + 1)
    return None


def start_nginx(port, workdir):
    """nginx, one worker process, serving INDEX_HTML at /index.html."""
    root = Path(workdir) / "www"
    root.mkdir()
    (root / "index.html").write_bytes(INDEX_HTML)
    os.chmod(workdir, 0o755)
    os.chmod(root, 0o755)
    temp = Path(workdir) / "nginx-temp"
    temp.mkdir()
    conf = Path(workdir) / "nginx.conf"
    conf.write_text(f"""
worker_processes 1;
daemon off;
pid {workdir}/nginx.pid;
error_log {workdir}/nginx-error.log;
events {{ worker_connections 4096; }}
http {{
    types {{ text/html html; }}
    access_log off;
    keepalive_requests 100000000;
    open_file_cache max=16;
    client_body_temp_path {temp}/body;
    proxy_temp_path {temp}/proxy;
    fastcgi_temp_path {temp}/fastcgi;
    uwsgi_temp_path {temp}/uwsgi;
    scgi_temp_path {temp}/scgi;
    server {{
        listen 127.0.0.1:{port};
        root {root};
    }}
}}
""")
    proc = subprocess.Popen(["taskset", "-c", servers.SERVER_CPU, "nginx", "-c", str(conf)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    servers.wait_line(port, proc, "nginx", b"GET /index.html HTTP/1.0\r\n\r\n", b"HTTP/1.1 200")
    return proc


def wrk(port, seconds):
    """One wrk run on /index.html; returns (requests/s, (p50 ms, p99 ms), requests)."""
    out = subprocess.run(
        ["taskset", "-c", servers.CLIENT_CPU, "wrk", "-t1", "-c50", f"-d{seconds}s", "--latency",
         f"http://127.0.0.1:{port}/index.html"],
        capture_output=True, text=True, timeout=seconds * 10 + 60).stdout
    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    if not rps or re.search(r"Non-2xx or 3xx responses|Socket errors", out):
        sys.exit(f"wrk failed or saw errors:\n{out}")
    total = re.search(r"(\d+) requests in", out)
    return float(rps.group(1)), (latency(out, "50%"), latency(out, "99%")), int(total.group(1))


def latency(out, pct):
    m = re.search(rf"^\s+{re.escape(pct)}\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
    if not m:
        return None
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]
    return float(m.group(1)) * scale


def set_index_html(port):
    """Stores INDEX_HTML under the key index.html through RESP."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"*3\r\n$3\r\nSET\r\n$10\r\nindex.html\r\n$%d\r\n%s\r\n" % (len(INDEX_HTML), INDEX_HTML))
        if not s.recv(16).startswith(b"+OK"):
            sys.exit("could not store index.html in shoal")


def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=int, default=5, help="length of each run")
    ap.add_argument("--rounds", type=int, default=2, help="reference/shoal pairs per case")
    ap.add_argument("--parts", default="memcached,http", help="comma-separated: memcached,http")
    ap.add_argument("--no-build", action="store_true")
    args = ap.parse_args()
    parts = args.parts.split(",")
    for tool in ["taskset"] + (["memcached", "memcaslap"] if "memcached" in parts else []) \
            + (["nginx", "wrk"] if "http" in parts else []):
        if not shutil.which(tool):
            sys.exit(f"{tool} is not installed")
    if not args.no_build:
        servers.build_shoal()

    name = f"shoal-bench-{os.getpid()}"
    ports = {k: servers.free_port() for k in ["resp", "mc_shoal", "http_shoal", "memcached", "nginx"]}
    procs = []
    workdir = tempfile.mkdtemp(prefix="shoal-bench-")
    rows = []
    try:
        shoal = servers.start_shoal(ports["resp"], name, "1g", memcached_port=ports["mc_shoal"],
                                    http_port=ports["http_shoal"])
        procs.append(shoal)
        if "memcached" in parts:
            memcached = servers.start_memcached(ports["memcached"], 1024)
            procs.append(memcached)
        if "http" in parts:
            nginx = start_nginx(ports["nginx"], workdir)
            procs.append(nginx)
            set_index_html(ports["resp"])
        print(f"servers on CPU {servers.SERVER_CPU}, clients on CPU {servers.CLIENT_CPU}; "
              f"{args.seconds}s runs, {args.rounds} alternating rounds each", flush=True)
        if "memcached" in parts:
            for case in MEMCACHED_CASES:
                for size in VALUE_SIZES:
                    got = {"memcached": [], "shoal": []}
                    for _ in range(args.rounds):
                        for who, proc, port in [("memcached", memcached, ports["memcached"]),
                                                ("shoal", shoal, ports["mc_shoal"])]:
                            got[who].append(measured(proc, lambda: memcaslap(
                                port, case, size, args.seconds, workdir)))
                    ref = mean([g[0] for g in got["memcached"]])
                    ours = mean([g[0] for g in got["shoal"]])
                    rows.append((f"memcaslap {case} {size}B", "memcached", ref, ours,
                                 mean([g[2] for g in got["memcached"]]), mean([g[2] for g in got["shoal"]]),
                                 f"<={max(g[1] or 0 for g in got['memcached'])}us",
                                 f"<={max(g[1] or 0 for g in got['shoal'])}us"))
                    print(f"  {rows[-1][0]}: memcached {ref:,.0f}/s, shoal {ours:,.0f}/s", flush=True)
        if "http" in parts:
            got = {"nginx": [], "shoal": []}
            for _ in range(args.rounds):
                for who, proc, port in [("nginx", nginx, ports["nginx"]), ("shoal", shoal, ports["http_shoal"])]:
                    got[who].append(measured(proc, lambda: wrk(port, args.seconds)))
            ref = mean([g[0] for g in got["nginx"]])
            ours = mean([g[0] for g in got["shoal"]])
            p = {who: (mean([g[1][0] for g in got[who]]), mean([g[1][1] for g in got[who]])) for who in got}
            rows.append(("wrk GET /index.html (42B)", "nginx", ref, ours,
                         mean([g[2] for g in got["nginx"]]), mean([g[2] for g in got["shoal"]]),
                         f"{fmt(p['nginx'][0], '.3f')}/{fmt(p['nginx'][1], '.3f')}ms",
                         f"{fmt(p['shoal'][0], '.3f')}/{fmt(p['shoal'][1], '.3f')}ms"))
            print(f"  {rows[-1][0]}: nginx {ref:,.0f}/s, shoal {ours:,.0f}/s", flush=True)
    finally:
        for p in procs:
            servers.stop(p)
        servers.remove_segment(name)
        shutil.rmtree(workdir, ignore_errors=True)

    print()
    print(f"{'case':<28} {'reference':<10} {'ref ops/s':>10} {'shoal ops/s':>11} {'ratio':>6} "
          f"{'ref /cpu-s':>10} {'shoal /cpu-s':>12} {'ratio':>6}  {'ref latency':>16} {'shoal latency':>16}")
    for case, ref_name, ref, ours, ref_cpu, our_cpu, ref_lat, our_lat in rows:
        cpu_ratio = our_cpu / ref_cpu if ref_cpu and our_cpu else None
        print(f"{case:<28} {ref_name:<10} {ref:>10,.0f} {ours:>11,.0f} {ours / ref:>6.2f} "
              f"{fmt(ref_cpu, ',.0f'):>10} {fmt(our_cpu, ',.0f'):>12} {fmt(cpu_ratio, '.2f'):>6}  "
              f"{ref_lat:>16} {our_lat:>16}")
    print("\n/cpu-s: operations per second of server CPU time (per core);"
          " latency: memcaslap p99 bucket upper bound; wrk p50/p99.")


if __name__ == "__main__":
    main()
