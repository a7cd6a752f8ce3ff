#!/usr/bin/env python3
"""What security costs: TLS against redis-server 7.0, and ACL checks on shoal.

1. TLS: redis-server 7.0 and `shoal serve --workers 1`, each with a
   `tls-port` (the same certificate, made here with openssl), both pinned to
   CPU 0 (bench/servers.py); `redis-benchmark --tls` pinned to CPU 1 runs
   SET and GET at pipeline 1 and 16, alternating redis, shoal, redis, shoal
   (--rounds pairs). One table: requests/s of each and the ratio
   shoal/redis, per core.
2. ACL: on each server, the same tests over plain TCP as the default user
   (no rules, no AUTH) and as a user with 50 rules (`bench`: 25 key
   patterns with the one SET and GET match last, 10 channel patterns,
   command rules and categories), alternating (which goes first changes
   every round). The cost is the growth of the server's CPU time per
   request (user + system, from /proc, for shoal its supervisor and
   worker) for the 50-rule user against the default user, the median over
   the rounds of each round's ratio: unlike requests/s, it moves little
   with what else the machine runs, and the median leaves out the rounds
   another job upset. Requests/s are shown beside it.

Needs redis-server, redis-benchmark (built with TLS), openssl and taskset;
only the standard library.
Usage: python3 bench/tls-acl.py [--requests N] [--rounds R (5)] [--only tls|acl] [--no-build]
"""

import argparse
import os
import subprocess
import sys
import tempfile

import servers

TESTS = ["set", "get"]

# The 50 rules of the ACL user: its key patterns are tried in order and the
# one redis-benchmark's keys match (`key:*`) comes last, so every command
# pays for the other 24.
ACL_RULES = (["on", ">benchpass", "+@all", "-@dangerous", "+info"]
             + [f"-{c}" for c in ("flushall", "flushdb", "debug", "shutdown", "monitor",
                                  "migrate", "restore", "keys", "config", "swapdb")]
             + [f"~tenant{i}:*" for i in range(24)] + ["~key:*"]
             + [f"&news{i}:*" for i in range(10)])
assert len(ACL_RULES) == 50


def make_certs(folder):
    """A CA and a server certificate it signs (X.509 v3, for 127.0.0.1 and
    localhost); returns (ca, cert, key) paths."""
    def ssl(*args):
        subprocess.run(["openssl", *args], cwd=folder, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ssl("req", "-x509", "-new", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", "2",
        "-subj", "/O=shoal bench/CN=bench CA", "-keyout", "ca.key", "-out", "ca.crt")
    ssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-sha256",
        "-subj", "/O=shoal bench/CN=localhost", "-keyout", "server.key", "-out", "server.csr")
    with open(os.path.join(folder, "ext.cnf"), "w") as f:
        f.write("subjectAltName = IP:127.0.0.1, DNS:localhost\n"
                "keyUsage = digitalSignature, keyEncipherment\n"
                "extendedKeyUsage = serverAuth\n")
    ssl("x509", "-req", "-sha256", "-days", "2", "-in", "server.csr", "-CA", "ca.crt",
        "-CAkey", "ca.key", "-CAcreateserial", "-extfile", "ext.cnf", "-out", "server.crt")
    os.chmod(os.path.join(folder, "server.key"), 0o600)
    return tuple(os.path.join(folder, n) for n in ("ca.crt", "server.crt", "server.key"))


def tls_options(port, ca, cert, key):
    """The same TLS settings for both servers (Redis's names)."""
    return ["--tls-port", str(port), "--tls-cert-file", cert, "--tls-key-file", key,
            "--tls-ca-cert-file", ca, "--tls-auth-clients", "no"]


def add_acl_user(port):
    argv = ["redis-cli", "-h", "127.0.0.1", "-p", str(port), "acl", "setuser", "bench"] + ACL_RULES
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout.strip()
    if out != "OK":
        sys.exit(f"ACL SETUSER on :{port} answered {out!r}")


def mean(xs):
    return sum(xs) / len(xs) if xs else None


def median(xs):
    xs = sorted(xs)
    return (xs[(len(xs) - 1) // 2] + xs[len(xs) // 2]) / 2


def per_round_costs(cpu):
    """Each round's CPU per request of the 50-rule user over the default
    user's: the two ran one after the other, so the machine's load (it is
    shared) moves both alike; the median of these ratios leaves out the
    rounds another job upset."""
    return [r / d for d, r in zip(cpu["default"], cpu["50 rules"]) if d > 0]


def print_tls_table(rows):
    """rows: (test, pipeline, {"redis": [rps, ...], "shoal": [...]})."""
    print("\nTLS (redis-benchmark --tls), requests/s")
    head = f"{'test':<5} {'P':>3} {'redis':>10} {'shoal':>10} {'shoal/redis':>12}"
    print(head)
    print("-" * len(head))
    for test, pipeline, got in rows:
        cells = "".join(f" {mean(got[w]):10.0f}" if got[w] else f" {'failed':>10}"
                        for w in ("redis", "shoal"))
        print(f"{test:<5} {pipeline:>3}{cells} {ratio(got['shoal'], got['redis']):>12}")


def ratio(a, b):
    return f"{mean(a) / mean(b):.2f}" if a and b else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=200_000, help="requests per run at pipeline 1")
    ap.add_argument("--requests-pipelined", type=int, default=2_000_000,
                    help="requests per run at pipeline 16")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--keyspace", type=int, default=100_000, help="redis-benchmark -r")
    ap.add_argument("--rounds", type=int, default=5, help="alternating pairs per row")
    ap.add_argument("--only", choices=("tls", "acl"), help="run one half of the bench")
    ap.add_argument("--no-build", action="store_true")
    args = ap.parse_args()
    if not args.no_build:
        servers.build_shoal()

    name = f"shoal-bench-tls-{os.getpid()}"
    ports = {who: (servers.free_port(), servers.free_port()) for who in ("redis", "shoal")}
    procs = []
    with tempfile.TemporaryDirectory(prefix="shoal-bench-tls-") as folder:
        ca, cert, key = make_certs(folder)
        try:
            procs.append(servers.start_redis(ports["redis"][0], tls_options(ports["redis"][1], ca, cert, key)))
            procs.append(servers.start_shoal(ports["shoal"][0], name, "512m",
                                             extra=tls_options(ports["shoal"][1], ca, cert, key)))
            pids = {"redis": procs[0].pid, "shoal": procs[1].pid}
            for who in ports:
                add_acl_user(ports[who][0])
            print(f"redis-server {servers.redis_version()} and shoal --workers 1, TLS on their "
                  f"tls-port (RSA 2048, tls-auth-clients no), on CPU {servers.SERVER_CPU}; "
                  f"redis-benchmark on CPU {servers.CLIENT_CPU}, -c {args.clients} "
                  f"-r {args.keyspace}, {args.rounds} alternating rounds", flush=True)
            tls_rows, acl_rows = [], []
            for test in TESTS:
                for pipeline, n in ((1, args.requests), (16, args.requests_pipelined)):
                    def run(port, extra):
                        r = servers.benchmark_figures(port, extra + ["-t", test], pipeline, n,
                                                      args.clients, args.keyspace)
                        return r[0] if r else None
                    tls = ["--tls", "--cacert", ca]
                    got = {"redis": [], "shoal": []}
                    for _ in range(args.rounds if args.only != "acl" else 0):
                        for who in got:
                            rps = run(ports[who][1], tls)
                            if rps is not None:
                                got[who].append(rps)
                    if args.only != "acl":
                        tls_rows.append((test.upper(), pipeline, got))
                    for who in ("redis", "shoal") if args.only != "tls" else ():
                        acl = {"default": [], "50 rules": []}
                        cpu = {"default": [], "50 rules": []}
                        users = [("default", []), ("50 rules", ["--user", "bench", "-a", "benchpass"])]
                        for r in range(args.rounds):
                            # Every other round runs the 50-rule user first,
                            # so a drift of the machine's speed during a
                            # round does not always favour the same user.
                            for user, extra in users if r % 2 == 0 else users[::-1]:
                                before = servers.cpu_seconds(pids[who])
                                rps = run(ports[who][0], extra)
                                if rps is not None:
                                    acl[user].append(rps)
                                    used = servers.cpu_seconds(pids[who]) - before
                                    cpu[user].append(used / n * 1e6)
                        cost = (f"{(median(per_round_costs(cpu)) - 1) * 100:+.1f}%"
                                if cpu["default"] and cpu["50 rules"] else "-")
                        acl_rows.append((f"{who}", test.upper(), pipeline, acl, cpu, cost))
                    print(".", end="", flush=True, file=sys.stderr)
            print(file=sys.stderr)
        finally:
            for proc in procs:
                servers.stop(proc)
            servers.remove_segment(name)

    if tls_rows:
        print_tls_table(tls_rows)
    if not acl_rows:
        return
    print("\nACL checks over plain TCP: requests/s and the server's CPU µs per request of the "
          "default user and the 50-rule user (cost: CPU per request, 50 rules against default)")
    head = (f"{'server':<6} {'test':<5} {'P':>3} {'rps default':>12} {'rps 50 rules':>12} "
            f"{'µs default':>10} {'µs 50 rules':>11} {'cost':>7}")
    print(head)
    print("-" * len(head))
    for who, test, pipeline, acl, cpu, cost in acl_rows:
        cells = "".join(f" {mean(acl[u]):12.0f}" if acl[u] else f" {'failed':>12}"
                        for u in ("default", "50 rules"))
        cells += "".join(f" {mean(cpu[u]):{w}.2f}" if cpu[u] else f" {'-':>{w}}"
                         for u, w in (("default", 10), ("50 rules", 11)))
        print(f"{who:<6} {test:<5} {pipeline:>3}{cells} {cost:>7}")
    print("requests/s and µs: means over the rounds; cost: the median over the rounds of the "
          "50-rule user's µs over the default user's in the same round (a negative cost means "
          "the 50-rule user took less CPU: noise)")
    print("\nCPU µs per request of each round (default / 50 rules)")
    for who, test, pipeline, acl, cpu, cost in acl_rows:
        rounds = " ".join(f"{d:.2f}/{r:.2f}" for d, r in zip(cpu["default"], cpu["50 rules"]))
        rounds += "  costs " + " ".join(f"{(c - 1) * 100:+.1f}%" for c in per_round_costs(cpu))
        print(f"{who:<6} {test:<5} {pipeline:>3}  {rounds}")


if __name__ == "__main__":
    main()
