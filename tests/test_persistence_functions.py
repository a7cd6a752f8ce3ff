"""Function libraries in the transaction log and the snapshots
(docs/persistence.md, "Function libraries"): FUNCTION LOAD, DELETE, FLUSH
and RESTORE are logged as the whole library set after the change, and a
snapshot holds the set, so a crash of every process plus the loss of the
segment (a reboot) brings back exactly the libraries there were, as Redis
brings them back from its RDB and AOF.

Every server here has its own ports, segment and directory (`tmp_path`)
and is killed at teardown. Nothing is timed: the tests wait for states."""

import struct
import subprocess

import pytest
import redis

from shoaltest import SHOAL_BIN, DurableServer, info_section, wait_for

pytestmark = pytest.mark.shoal_only


def library(name, reply):
    return (f"#!lua name={name}\n"
            f"redis.register_function{{function_name='{name}_get', flags={{'no-writes'}},\n"
            f"  callback=function(keys, args) return '{reply}' end}}\n"
            f"redis.register_function('{name}_set', function(keys, args)\n"
            f"  return redis.call('set', keys[1], args[1]) end)\n")


def listing(r):
    """FUNCTION LIST WITHCODE, ordered by library name."""
    libs = r.execute_command("FUNCTION", "LIST", "WITHCODE")
    return sorted((repr(lib) for lib in libs))


def names(r):
    """The libraries' names (FUNCTION LIST's flat RESP2 maps), sorted."""
    return sorted(dict(zip(lib[::2], lib[1::2]))["library_name"] for lib in r.function_list())


def wait_log_written(server):
    with server.raw() as c:
        def written():
            p = info_section(c, "persistence")
            return int(p["shoal_log_written_lsn"]) >= int(p["shoal_log_head_lsn"])
        wait_for(written, timeout=30, what="the log writer to catch up with the ring")


def reboot_keeps_libraries(server, r):
    """Waits for the log writer, reboots `server` from its directory and
    checks the libraries are the ones `r` listed; returns a new client."""
    expected = listing(r)
    wait_log_written(server)
    server.reboot()
    r = server.client()
    assert listing(r) == expected
    return r


def save(server):
    """SAVE: a snapshot is counted once it is written."""
    with server.raw() as c:
        saves = int(info_section(c, "persistence")["rdb_saves"])
        assert c.cmd("SAVE") == "OK"
        assert int(info_section(c, "persistence")["rdb_saves"]) > saves
    assert list(server.dir.glob("snapshot-*.shsnap")), list(server.dir.iterdir())


@pytest.fixture
def durable(tmp_path):
    server = DurableServer(tmp_path / "data")
    yield server
    server.stop()


def load_delete_restore(r):
    """Two libraries loaded, one deleted, the other one restored (APPEND)
    from a dump after its deletion; a third one loaded, then replaced."""
    assert r.function_load(library("alpha", "a")) == "alpha"
    assert r.function_load(library("beta", "b")) == "beta"
    assert r.function_delete("alpha")
    dump = r.function_dump()
    assert r.function_delete("beta")
    assert r.function_load(library("gamma", "g")) == "gamma"
    assert r.function_restore(dump, "APPEND")
    assert r.function_load(library("gamma", "g2"), replace=True) == "gamma"


def test_libraries_survive_a_reboot_from_the_log(durable):
    durable.start()
    r = durable.client()
    load_delete_restore(r)
    r.fcall("beta_set", 1, "k", "v")
    assert names(r) == ["beta", "gamma"]
    r = reboot_keeps_libraries(durable, r)
    assert r.fcall_ro("beta_get", 0) == "b"
    assert r.fcall_ro("gamma_get", 0) == "g2"
    with pytest.raises(redis.ResponseError, match="Function not found"):
        r.fcall_ro("alpha_get", 0)
    assert r.get("k") == "v"
    # Functions loaded after the replay are logged too.
    assert r.fcall("gamma_set", 1, "k2", "w") == "OK"
    assert r.function_load(library("delta", "d")) == "delta"
    r = reboot_keeps_libraries(durable, r)
    assert r.fcall_ro("delta_get", 0) == "d" and r.get("k2") == "w"


def test_libraries_survive_a_reboot_from_a_snapshot_and_the_log_after_it(durable):
    durable.start()
    r = durable.client()
    load_delete_restore(r)
    save(durable)
    # After the snapshot: one deleted, one loaded.
    assert r.function_delete("beta")
    assert r.function_load(library("epsilon", "e")) == "epsilon"
    r = reboot_keeps_libraries(durable, r)
    assert r.fcall_ro("epsilon_get", 0) == "e" and r.fcall_ro("gamma_get", 0) == "g2"
    with pytest.raises(redis.ResponseError, match="Function not found"):
        r.fcall_ro("beta_get", 0)
    # A snapshot with nothing logged after it.
    save(durable)
    r = reboot_keeps_libraries(durable, r)
    # Both workers run them.
    for _ in range(8):
        with durable.raw() as c:
            assert c.cmd("FCALL_RO", "epsilon_get", "0") == b"e"


def test_flush_then_crash_leaves_no_library(durable):
    durable.start()
    r = durable.client()
    load_delete_restore(r)
    save(durable)
    assert r.function_flush()
    wait_log_written(durable)
    durable.reboot()
    r = durable.client()
    assert r.function_list() == []
    with pytest.raises(redis.ResponseError, match="Function not found"):
        r.fcall_ro("gamma_get", 0)
    # A RESTORE with FLUSH after that, then a crash: only the dump's.
    assert r.function_load(library("zeta", "z")) == "zeta"
    dump = r.function_dump()
    assert r.function_load(library("eta", "h")) == "eta"
    assert r.function_restore(dump, "FLUSH")
    r = reboot_keeps_libraries(durable, r)
    assert names(r) == ["zeta"]


def test_a_failed_change_is_not_logged(durable):
    durable.start()
    r = durable.client()
    assert r.function_load(library("alpha", "a")) == "alpha"
    with pytest.raises(redis.ResponseError, match="already exists"):
        r.function_load(library("alpha", "other"))
    with pytest.raises(redis.ResponseError, match="Library not found"):
        r.function_delete("nothing")
    r = reboot_keeps_libraries(durable, r)
    assert r.fcall_ro("alpha_get", 0) == "a"


def test_the_log_dump_shows_the_function_record(durable, tmp_path):
    durable.start()
    r = durable.client()
    assert r.function_load(library("alpha", "a")) == "alpha"
    wait_log_written(durable)
    durable.kill_all()
    logs = sorted((tmp_path / "data").glob("log-*.shlog"))
    assert logs
    out = subprocess.run([SHOAL_BIN, "log", "dump", str(logs[-1])], capture_output=True,
                         text=True, timeout=60)
    assert "FUNCTIONS" in out.stdout, out.stdout + out.stderr


def crc32c(data, crc=0):
    """CRC-32C (Castagnoli), as the frames carry it."""
    crc ^= 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def function_frames(path):
    """[(offset, payload length)] of the log file's `Functions` frames."""
    data = path.read_bytes()
    out, off = [], 32
    while off + 16 <= len(data):
        _lsn, n, _crc = struct.unpack_from("<QII", data, off)
        if data[off + 16] & 0x7F == 19:
            out.append((off, n))
        off += 16 + (n + 7) // 8 * 8
    return out


def test_a_function_record_with_a_damaged_set_stops_the_start(durable):
    """A `Functions` record whose frame checks (CRC32C right) but whose
    library set does not (its own checksum) stops the start with the
    record's LSN, as a record the store cannot apply does; nothing panics.
    (A frame whose CRC is wrong is refused before that, as any frame is:
    tests/test_log_files.py.)"""
    durable.start()
    r = durable.client()
    assert r.function_load(library("alpha", "a")) == "alpha"
    r.set("k", "v")
    wait_log_written(durable)
    durable.kill_all()
    log = sorted(durable.dir.glob("log-*.shlog"))[-1]
    ((off, n),) = function_frames(log)
    data = bytearray(log.read_bytes())
    pristine = bytes(data)
    # A byte of the library's code changed, the frame's CRC made right.
    code_at = data.index(b"alpha_get", off)
    data[code_at] ^= 0x01
    head = data[off:off + 12]
    struct.pack_into("<I", data, off + 12, crc32c(bytes(head) + bytes(data[off + 16:off + 16 + n])))
    log.write_bytes(bytes(data))
    durable.remove_segment()
    code, out = durable.start_failing()
    assert code != 0, out
    lsn = struct.unpack_from("<Q", pristine, off)[0]
    assert f"LSN {lsn}" in out and "damaged" in out, out
    assert "panicked" not in out, out


def test_a_set_too_large_for_the_log_changes_nothing(tmp_path):
    """On a 16 MiB segment one record is at most 1 MiB: a FUNCTION LOAD
    whose set would be larger is refused as any such write is, and the
    libraries stay as they were, on every worker and after a reboot."""
    server = DurableServer(tmp_path / "small", memory="16m")
    try:
        server.start()
        r = server.client()
        assert r.function_load(library("alpha", "a")) == "alpha"
        before = listing(r)
        big = library("huge", "h") + "-- " + "x" * (3 << 19) + "\n"
        with pytest.raises(redis.ResponseError, match="exceeds the log ring's limit"):
            r.function_load(big)
        for _ in range(8):
            with server.raw() as c:
                assert c.cmd("FCALL_RO", "alpha_get", "0") == b"a"
                assert str(c.cmd("FCALL_RO", "huge_get", "0")).startswith("ERR Function not found")
        assert listing(r) == before
        wait_log_written(server)
        server.reboot()
        assert listing(server.client()) == before
    finally:
        server.stop()
