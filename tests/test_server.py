"""Server commands end to end: INFO (and its sections), CONFIG GET/SET/
RESETSTAT, COMMAND COUNT/INFO/DOCS, TIME, DBSIZE, and SHUTDOWN (last, on a
server of its own). Replies as redis-server 7.0 gives them; the `workers` INFO
section is shoal's own: a "# Workers" header and a `workers:<count>` line."""

import os
import time

import pytest

from shoaltest import Err, Map, wait_for


def parse_info(text):
    if isinstance(text, bytes):
        text = text.decode()
    sections, fields, current = [], {}, None
    for line in text.split("\r\n"):
        if line.startswith("# "):
            current = line[2:].strip()
            sections.append(current)
        elif line:
            k, _, v = line.partition(":")
            fields[k] = v
    return sections, fields


def test_info_default_sections(raw):
    text = raw.cmd("INFO")
    assert isinstance(text, bytes)
    sections, fields = parse_info(text)
    for s in ["Server", "Clients", "Memory", "Stats", "Keyspace"]:
        assert s in sections, sections
    assert fields["redis_version"].startswith("7.0.")
    assert fields["redis_mode"] == "standalone"
    assert int(fields["tcp_port"]) == raw.sock.getpeername()[1]
    assert int(fields["process_id"]) > 0
    assert int(fields["uptime_in_seconds"]) >= 0
    assert int(fields["connected_clients"]) >= 1
    assert int(fields["used_memory"]) >= 0
    assert int(fields["total_commands_processed"]) >= 0
    assert int(fields["total_connections_received"]) >= 1
    assert text.endswith(b"\r\n")


def test_info_single_sections(raw):
    for name, header, field in [("server", "Server", "redis_version"),
                                ("clients", "Clients", "connected_clients"),
                                ("memory", "Memory", "used_memory"),
                                ("stats", "Stats", "keyspace_hits"),
                                ("keyspace", "Keyspace", None)]:
        sections, fields = parse_info(raw.cmd("INFO", name))
        assert sections == [header], name
        if field:
            assert field in fields, (name, field)
    sections, _ = parse_info(raw.cmd("INFO", "SERVER", "clients"))
    assert sections == ["Server", "Clients"]
    assert raw.cmd("INFO", "nosuchsection") == b""


def test_info_keyspace(raw):
    assert parse_info(raw.cmd("INFO", "keyspace"))[1] == {}
    raw.cmd("MSET", "a", "1", "b", "2")
    raw.cmd("EXPIRE", "a", "1000")
    raw.cmd("SELECT", "3")
    raw.cmd("SET", "c", "3")
    _, fields = parse_info(raw.cmd("INFO", "keyspace"))
    assert set(fields) == {"db0", "db3"}
    db0 = dict(kv.split("=") for kv in fields["db0"].split(","))
    assert db0["keys"] == "2" and db0["expires"] == "1" and "avg_ttl" in db0
    assert fields["db3"].startswith("keys=1,expires=0,")


def test_info_stats_count_hits_and_misses(raw):
    raw.cmd("CONFIG", "RESETSTAT")
    raw.cmd("SET", "k", "v")
    raw.cmd("GET", "k")
    raw.cmd("GET", "k")
    raw.cmd("GET", "nokey")
    _, fields = parse_info(raw.cmd("INFO", "stats"))
    assert fields["keyspace_hits"] == "2"
    assert fields["keyspace_misses"] == "1"
    assert int(fields["total_commands_processed"]) >= 5
    assert raw.cmd("CONFIG", "RESETSTAT") == "OK"
    _, fields = parse_info(raw.cmd("INFO", "stats"))
    assert fields["keyspace_hits"] == "0"
    assert fields["keyspace_misses"] == "0"


@pytest.mark.shoal_only
def test_info_workers(make_server):
    s = make_server(workers=2)
    with s.raw() as c:
        sections, fields = parse_info(c.cmd("INFO", "workers"))
        assert sections == ["Workers"]
        assert fields["workers"] == "2"
        assert "Workers" in parse_info(c.cmd("INFO", "all"))[0]


@pytest.mark.shoal_only
def test_info_used_memory_is_what_maxmemory_limits(make_server):
    """used_memory is the arena's bytes in use; the segment's fixed
    structures are reported apart (shoal_fixed_bytes)."""
    s = make_server()
    with s.raw() as c:
        _, empty = parse_info(c.cmd("INFO", "memory"))
        assert int(empty["shoal_fixed_bytes"]) + int(empty["shoal_arena_bytes"]) == int(
            empty["shoal_segment_bytes"])
        assert int(empty["used_memory"]) < int(empty["shoal_fixed_bytes"])
        assert empty["mem_not_counted_for_evict"] == "0"
        c.cmd("SET", "big", "x" * 100_000)
        _, full = parse_info(c.cmd("INFO", "memory"))
        assert int(full["used_memory"]) >= int(empty["used_memory"]) + 100_000
        assert full["used_memory"] == full["used_memory_dataset"]
        assert full["shoal_fixed_bytes"] == empty["shoal_fixed_bytes"]


def test_info_redis_py(r):
    info = r.info()
    assert info["redis_version"].startswith("7.0.")
    assert "used_memory" in r.info("memory")


def test_config_get_set_maxmemory(raw):
    assert raw.cmd("CONFIG", "GET", "maxmemory-policy") == [b"maxmemory-policy", b"noeviction"]
    before = raw.cmd("CONFIG", "GET", "maxmemory")
    assert before[0] == b"maxmemory" and before[1].isdigit()
    try:
        assert raw.cmd("CONFIG", "SET", "maxmemory", "10mb") == "OK"
        assert raw.cmd("CONFIG", "GET", "maxmemory") == [b"maxmemory", b"10485760"]
        assert raw.cmd("CONFIG", "SET", "maxmemory-policy", "allkeys-lru", "maxmemory", "1000000") == "OK"
        reply = raw.cmd("CONFIG", "GET", "maxmemory", "maxmemory-policy")
        assert dict(zip(reply[::2], reply[1::2])) == {
            b"maxmemory": b"1000000", b"maxmemory-policy": b"allkeys-lru"}
        for policy in ["volatile-lru", "allkeys-random", "volatile-ttl", "noeviction"]:
            assert raw.cmd("CONFIG", "SET", "maxmemory-policy", policy) == "OK"
            assert raw.cmd("CONFIG", "GET", "maxmemory-policy") == [b"maxmemory-policy", policy.encode()]
    finally:
        raw.cmd("CONFIG", "SET", "maxmemory", before[1])
        raw.cmd("CONFIG", "SET", "maxmemory-policy", "noeviction")


def test_config_get_glob(raw):
    reply = raw.cmd("CONFIG", "GET", "maxmemory*")
    names = reply[::2]
    assert b"maxmemory" in names and b"maxmemory-policy" in names
    assert all(n.startswith(b"maxmemory") for n in names)
    assert raw.cmd("CONFIG", "GET", "nosuchparameter") == []


def test_config_errors(raw):
    assert raw.cmd("CONFIG", "SET", "maxmemory-policy", "foo") == Err(
        "ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) "
        "must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, "
        "allkeys-lru, allkeys-lfu, allkeys-random, noeviction")
    assert raw.cmd("CONFIG", "SET", "maxmemory", "x") == Err(
        "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value")
    assert raw.cmd("CONFIG", "SET", "nosuch", "1") == Err(
        "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'")
    assert raw.cmd("CONFIG", "SET", "maxmemory-policy", "volatile-lru", "maxmemory-policy", "allkeys-lru") == Err(
        "ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - duplicate parameter")
    assert raw.cmd("CONFIG", "GET", "maxmemory-policy") == [b"maxmemory-policy", b"noeviction"]
    assert raw.cmd("CONFIG", "FOO") == Err("ERR unknown subcommand 'FOO'. Try CONFIG HELP.")
    assert raw.cmd("CONFIG", "GET") == Err("ERR wrong number of arguments for 'config|get' command")
    assert raw.cmd("CONFIG", "SET", "maxmemory") == Err(
        "ERR wrong number of arguments for 'config|set' command")


def test_config_lists_every_redis_parameter(raw):
    """CONFIG GET * lists Redis 7.0's parameters (aliases too) with Redis's
    defaults, and CONFIG SET checks and keeps them."""
    reply = raw.cmd("CONFIG", "GET", "*")
    params = dict(zip(reply[::2], reply[1::2]))
    assert len(params) >= 190
    for name, default in [
        (b"list-max-listpack-size", b"-2"), (b"list-max-ziplist-size", b"-2"),
        (b"list-compress-depth", b"0"), (b"hash-max-ziplist-value", b"64"),
        (b"set-max-intset-entries", b"512"), (b"zset-max-listpack-entries", b"128"),
        (b"hll-sparse-max-bytes", b"3000"), (b"slowlog-log-slower-than", b"10000"),
        (b"cluster-enabled", b"no"), (b"appendfilename", b"appendonly.aof"),
        (b"slave-read-only", b"yes"), (b"latency-tracking-info-percentiles", b"50 99 99.9"),
    ]:
        assert params[name] == default, name
    try:
        assert raw.cmd("CONFIG", "SET", "hash-max-ziplist-entries", "16", "list-compress-depth", "2") == "OK"
        assert raw.cmd("CONFIG", "GET", "hash-max-listpack-entries") == [b"hash-max-listpack-entries", b"16"]
        assert raw.cmd("CONFIG", "GET", "list-compress-depth") == [b"list-compress-depth", b"2"]
    finally:
        raw.cmd("CONFIG", "SET", "hash-max-listpack-entries", "512", "list-compress-depth", "0")
    assert raw.cmd("CONFIG", "SET", "list-compress-depth", "x") == Err(
        "ERR CONFIG SET failed (possibly related to argument 'list-compress-depth') - argument couldn't be parsed into an integer")
    assert raw.cmd("CONFIG", "SET", "activerehashing", "maybe") == Err(
        "ERR CONFIG SET failed (possibly related to argument 'activerehashing') - argument must be 'yes' or 'no'")
    assert raw.cmd("CONFIG", "SET", "daemonize", "yes") == Err(
        "ERR CONFIG SET failed (possibly related to argument 'daemonize') - can't set immutable config")
    # Settings fixed at start take the value they have (Redis's own test
    # sets every listed setting to its value) and refuse any other.
    port = raw.cmd("CONFIG", "GET", "port")[1]
    assert raw.cmd("CONFIG", "SET", "port", port, "appendonly", "no", "workers", "1") == "OK"
    assert raw.cmd("CONFIG", "SET", "workers", "7") == Err(
        "ERR CONFIG SET failed (possibly related to argument 'workers') - can't set immutable config")
    assert raw.cmd("CONFIG", "GET", "port") == [b"port", port]


def test_config_redis_py(r):
    assert r.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
    assert r.config_resetstat() is True


def test_command_count_info_docs(raw):
    count = raw.cmd("COMMAND", "COUNT")
    assert isinstance(count, int) and count >= 20
    info = raw.cmd("COMMAND", "INFO", "get", "set", "nosuchcommand")
    assert len(info) == 3 and info[2] is None
    get, set_ = info[0], info[1]
    assert get[:6] == [b"get", 2, ["readonly", "fast"], 1, 1, 1]
    assert "@read" in get[6] and "@string" in get[6]
    assert set_[0] == b"set" and set_[1] == -3 and "write" in set_[2] and "denyoom" in set_[2]
    assert set_[3:6] == [1, 1, 1]
    docs = raw.cmd("COMMAND", "DOCS", "get")
    assert docs[0] == b"get"
    d = dict(zip(docs[1][::2], docs[1][1::2]))
    assert d[b"summary"] == b"Get the value of a key"
    assert d[b"group"] == b"string"
    assert d[b"since"] == b"1.0.0"
    assert raw.cmd("COMMAND", "FOO") == Err("ERR unknown subcommand 'FOO'. Try COMMAND HELP.")


def test_command_lists_every_command(raw):
    names = {c[0] for c in raw.cmd("COMMAND")}
    assert {b"get", b"set", b"ping", b"client", b"info", b"config", b"command"} <= names
    assert raw.cmd("COMMAND", "COUNT") == len(names)


def test_time(raw):
    secs, micros = raw.cmd("TIME")
    assert isinstance(secs, bytes) and isinstance(micros, bytes)
    assert abs(int(secs) - time.time()) < 5
    assert 0 <= int(micros) < 1_000_000
    assert raw.cmd("TIME", "x") == Err("ERR wrong number of arguments for 'time' command")


def test_dbsize_arity(raw):
    assert raw.cmd("DBSIZE", "x") == Err("ERR wrong number of arguments for 'dbsize' command")


def test_shutdown_stops_the_server(make_server):
    s = make_server(workers=2)
    pids = [s.pid] + s.worker_pids()
    with s.raw() as c:
        c.cmd("SET", "k", "v")
        try:
            reply = c.cmd("SHUTDOWN", "NOSAVE")
            pytest.fail(f"SHUTDOWN replied {reply!r}")
        except (ConnectionError, OSError):
            pass
    assert s.proc.wait(15) == 0
    for pid in pids:
        wait_for(lambda: not os.path.exists(f"/proc/{pid}") or
                 open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z",
                 what=f"process {pid} to exit")
    with pytest.raises(OSError):
        s.raw()


def test_shutdown_errors(raw):
    assert raw.cmd("SHUTDOWN", "FOO") == Err("ERR syntax error")
    assert raw.cmd("PING") == "PONG"


def test_command_list_names_subcommands_and_filters(raw):
    names = raw.cmd("COMMAND", "LIST")
    assert b"config|get" in names and b"get" in names
    assert raw.cmd("COMMAND", "LIST", "FILTERBY", "PATTERN", "config|g*") == [b"config|get"]
    hll = raw.cmd("COMMAND", "LIST", "FILTERBY", "ACLCAT", "hyperloglog")
    assert sorted(hll) == [b"pfadd", b"pfcount", b"pfdebug", b"pfmerge", b"pfselftest"]
    assert raw.cmd("COMMAND", "LIST", "FILTERBY", "MODULE", "nosuch") == []


def test_command_getkeys(raw):
    assert raw.cmd("COMMAND", "GETKEYS", "MSET", "a", "b", "c", "d") == [b"a", b"c"]
    assert raw.cmd("COMMAND", "GETKEYS", "SORT", "abc", "STORE", "x", "STORE", "def") == [b"abc", b"def"]
    assert raw.cmd("COMMAND", "GETKEYS", "ZUNIONSTORE", "t", "2", "a", "b", "WEIGHTS", "1", "2") == [b"t", b"a", b"b"]
    assert raw.cmd("COMMAND", "GETKEYS", "BLMPOP", "0", "2", "a", "b", "LEFT") == [b"a", b"b"]
    assert raw.cmd("COMMAND", "GETKEYS", "MEMORY", "USAGE", "key") == [b"key"]
    assert raw.cmd("COMMAND", "GETKEYS", "NOSUCH", "a") == Err("ERR Invalid command specified")
    assert raw.cmd("COMMAND", "GETKEYS", "GET", "a", "b") == Err(
        "ERR Invalid number of arguments specified for command")
    assert raw.cmd("COMMAND", "GETKEYS", "PING", "x") == Err("ERR The command has no key arguments")
    assert raw.cmd("COMMAND", "GETKEYS", "GEORADIUS", "k", "0", "0", "1", "km", "STORE", "d") == [b"k", b"d"]


def test_command_getkeysandflags_gives_each_key_its_access(raw):
    def keys(*request):
        return [(k, list(flags))
                for k, flags in raw.cmd("COMMAND", "GETKEYSANDFLAGS", *request)]
    assert keys("SET", "k1", "v1") == [(b"k1", ["OW", "update"])]
    assert keys("SET", "k1", "v1", "GET") == [(b"k1", ["RW", "access", "update"])]
    assert keys("LMOVE", "k1", "k2", "left", "right") == [
        (b"k1", ["RW", "access", "delete"]), (b"k2", ["RW", "insert"])]
    assert keys("SORT", "k1", "STORE", "k2") == [(b"k1", ["RO", "access"]), (b"k2", ["OW", "update"])]
    assert keys("BITFIELD", "k", "GET", "u8", "0") == [(b"k", ["RO", "access"])]
    assert keys("BITFIELD", "k", "SET", "u8", "0", "1") == [(b"k", ["RW", "access", "update"])]
    assert keys("ZUNIONSTORE", "t", "2", "a", "b") == [
        (b"t", ["OW", "update"]), (b"a", ["RO", "access"]), (b"b", ["RO", "access"])]
    assert keys("EXISTS", "a") == [(b"a", ["RO"])]
    # No key found: an empty list where the command may have none.
    assert raw.cmd("COMMAND", "GETKEYSANDFLAGS", "EVAL", "return 1", "0") == []
    assert raw.cmd("COMMAND", "GETKEYS", "EVAL", "return 1", "0") == []


def test_command_info_has_key_specs_and_tips(raw):
    info = raw.cmd("COMMAND", "INFO", "LMOVE", "KEYS")
    lmove, keys_cmd = info
    specs = lmove[8]
    assert [s[1] for s in specs] == [["RW", "access", "delete"], ["RW", "insert"]]
    assert specs[0][2:] == [b"begin_search", [b"type", b"index", b"spec", [b"index", 1]],
                            b"find_keys", [b"type", b"range", b"spec",
                                           [b"lastkey", 0, b"keystep", 1, b"limit", 0]]]
    assert keys_cmd[7] == [b"request_policy:all_shards", b"nondeterministic_output_order"]
    xread = raw.cmd("COMMAND", "INFO", "XREAD")[0]
    assert "movablekeys" in xread[2]
