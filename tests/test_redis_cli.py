"""redis-cli against shoal: a few commands as a subprocess, and `--pipe` mass
insertion of 1,000,000 SET commands generated here (redis-cli must report
`errors: 0, replies: 1000000`, and DBSIZE must then be 1000000)."""

import subprocess

N = 1_000_000


def cli(port, *args, stdin=None):
    p = subprocess.run(["redis-cli", "-p", str(port), *args], input=stdin,
                       capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_redis_cli_commands(server, r):
    assert cli(server.port, "PING") == b"PONG\n"
    assert cli(server.port, "SET", "greeting", "hello world") == b"OK\n"
    assert cli(server.port, "GET", "greeting") == b"hello world\n"
    assert cli(server.port, "GET", "nokey") == b"\n"
    assert cli(server.port, "EXISTS", "greeting", "nokey") == b"1\n"
    assert cli(server.port, "DEL", "greeting") == b"1\n"
    assert cli(server.port, "-n", "3", "SET", "k", "in3") == b"OK\n"
    assert cli(server.port, "-n", "3", "GET", "k") == b"in3\n"
    assert cli(server.port, "NOSUCH").startswith(b"ERR unknown command 'NOSUCH'")


def test_redis_cli_pipe_mass_insertion(make_server):
    s = make_server(memory="512m")
    proto = b"".join(b"*3\r\n$3\r\nSET\r\n$%d\r\nkey:%d\r\n$%d\r\nvalue:%d\r\n"
                     % (len(b"key:%d" % i), i, len(b"value:%d" % i), i) for i in range(N))
    out = cli(s.port, "--pipe", stdin=proto).decode()
    assert out.strip().splitlines()[-1] == f"errors: 0, replies: {N}", out
    assert cli(s.port, "GET", "key:0") == b"value:0\n"
    assert cli(s.port, "GET", f"key:{N - 1}") == f"value:{N - 1}\n".encode()
    assert cli(s.port, "DBSIZE") == b"%d\n" % N
