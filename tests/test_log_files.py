"""The files in `--dir` and the tools that check them (issue 7): `shoal log
verify [--truncate]`, `shoal log dump`, `shoal snapshot verify`, and what
the server does at startup with a torn log tail (reports it, cuts it,
starts), a flipped bit inside an earlier log file (refuses to start, naming
the file, the offset and the repair), and a truncated or corrupted snapshot
(never loaded silently: an older snapshot or the whole log instead, or a
refusal; the data is never wrong).

The tests parse the files themselves (common.md's byte layout: a 32-byte
header, then frames of u64 LSN, u32 length, u32 CRC32C, payload padded to
8 bytes) only to find frame boundaries; the checking is shoal's.
"""

import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from shoaltest import SHOAL_BIN, state_diff, store_state, wait_for

pytestmark = pytest.mark.shoal_only

FILE_HEADER = 32
FRAME_HEADER = 16


def shoal(*args):
    """Runs the shoal CLI: (exit code, stdout + stderr)."""
    p = subprocess.run([SHOAL_BIN, *map(str, args)], capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def log_files(d):
    """The log files of a directory, oldest first (names sort by LSN)."""
    return sorted(Path(d).glob("log-*.shlog"))


def snapshots(d):
    return sorted(Path(d).glob("snapshot-*.shsnap"))


def frames(path, start=FILE_HEADER, end=None):
    """[(offset, lsn, payload length, frame size)] of a valid file region."""
    data = Path(path).read_bytes()
    end = len(data) if end is None else end
    out, off = [], start
    while off + FRAME_HEADER <= end:
        lsn, n, _crc = struct.unpack_from("<QII", data, off)
        size = FRAME_HEADER + (n + 7) // 8 * 8
        if off + size > end:
            break
        out.append((off, lsn, n, size))
        off += size
    return out


def first_lsn(path):
    return struct.unpack_from("<Q", Path(path).read_bytes(), 16)[0]


def end_lsn(path):
    """The LSN the next frame after this (valid, whole) log file would get."""
    return first_lsn(path) + Path(path).stat().st_size - FILE_HEADER


def verify_counts(out):
    """(records, valid bytes) from `shoal log verify`'s output."""
    rec = re.search(r"(\d+)\s+(?:valid\s+)?(?:records|frames)", out)
    valid = (re.search(r"valid prefix(?: of| is|:)?\s+(\d+)", out)
             or re.search(r"(\d+)\s+(?:valid\s+)?bytes", out))
    assert rec and valid, f"no record count and valid length in:\n{out}"
    return int(rec.group(1)), int(valid.group(1))


def fill(s, n=200, size=1000, prefix="k"):
    """n SETs of `size`-byte values, one pipeline; returns {key: value}."""
    want = {f"{prefix}:{i:05d}".encode(): bytes([i % 251]) * size for i in range(n)}
    with s.raw(timeout=60) as c:
        replies = c.pipeline(*[("SET", k, v) for k, v in want.items()])
        assert all(r == "OK" for r in replies)
    return want


def check_values(s, want):
    with s.raw(timeout=60) as c:
        keys = list(want)
        assert c.pipeline(*[("GET", k) for k in keys]) == [want[k] for k in keys]
        assert c.cmd("DBSIZE") == len(want)


def full_state(s):
    with s.raw(timeout=60) as c:
        return store_state(c)


def flip_bit(path, offset, bit=0x10):
    data = bytearray(Path(path).read_bytes())
    data[offset] ^= bit
    Path(path).write_bytes(bytes(data))


# ---------------------------------------------------------------------------
# verify and dump on intact files


def test_verify_and_dump_after_a_clean_shutdown(durable):
    s = durable("always").start()
    want = fill(s, 50)
    with s.raw() as c:
        assert c.cmd("RPUSH", "list-key", "a", "b") == 2
        assert c.cmd("HSET", "hash-key", "f", "v") == 1
        assert c.pipeline(("MULTI",), ("INCR", "tx-key"), ("SADD", "set-key", "m"), ("EXEC",))[-1] == [1, 1]
    assert s.shutdown() == 0
    logs = log_files(s.dir)
    assert logs, list(s.dir.iterdir())
    total = 0
    for f in logs:
        code, out = shoal("log", "verify", f)
        assert code == 0, out
        n = len(frames(f))
        assert verify_counts(out) == (n, f.stat().st_size), out
        total += n
    assert total >= 50 + 3

    code, out = shoal("log", "dump", logs[-1])
    assert code == 0, out
    lines = [line for line in out.splitlines() if line.startswith("lsn=")]
    assert len(lines) == len(frames(logs[-1]))
    for key in ("k:00000", "k:00049", "list-key", "hash-key", "tx-key", "set-key"):
        assert any(key in line for line in lines), (key, out[:2000])
    lsns = [int(line.split()[0][4:]) for line in lines]
    assert lsns == [lsn for _, lsn, _, _ in frames(logs[-1])]
    # The MULTI/EXEC group: its first frame is marked as continued, and the
    # group closes (a frame without the mark, or a PAD) after its second.
    at = next(i for i, line in enumerate(lines) if "tx-key" in line)
    assert lines[at].endswith(" +") and "set-key" in lines[at + 1], lines[at:at + 3]
    closing = lines[at + 1] if not lines[at + 1].endswith(" +") else lines[at + 2]
    assert not closing.endswith(" +"), lines[at:at + 3]

    s.remove_segment()
    s.start()
    check_values_subset(s, want)


def check_values_subset(s, want):
    with s.raw(timeout=60) as c:
        keys = list(want)
        assert c.pipeline(*[("GET", k) for k in keys]) == [want[k] for k in keys]


# ---------------------------------------------------------------------------
# torn tail of the last file


def torn_frame(path):
    """A frame header that claims the next LSN and 100 bytes, then 20 of
    them: a write cut short."""
    return struct.pack("<QII", end_lsn(path), 100, 0xDEADBEEF) + b"\xab" * 20


@pytest.mark.parametrize("garbage", ["torn-frame", "random"])
def test_torn_tail_verify_and_truncate(durable, garbage):
    s = durable("everysec").start()
    fill(s, 30)
    assert s.shutdown() == 0
    last = log_files(s.dir)[-1]
    size = last.stat().st_size
    records = len(frames(last))
    assert records > 0
    tail = torn_frame(last) if garbage == "torn-frame" else bytes(range(7, 250, 3))
    with open(last, "ab") as f:
        f.write(tail)

    code, out = shoal("log", "verify", last)
    assert code == 1, out
    assert verify_counts(out) == (records, size), out
    assert str(size) in out

    code, out = shoal("log", "verify", "--truncate", last)
    assert code == 0, out
    assert last.stat().st_size == size
    code, out = shoal("log", "verify", last)
    assert code == 0, out
    assert verify_counts(out) == (records, size), out


def test_server_cuts_a_torn_tail_at_startup(durable):
    s = durable("always").start()
    want = fill(s, 40)
    assert s.shutdown() == 0
    last = log_files(s.dir)[-1]
    size = last.stat().st_size
    with open(last, "ab") as f:
        f.write(torn_frame(last))
    s.remove_segment()
    s.start()
    out = s.text()
    assert last.name in out, out
    assert re.search(r"torn|cut|truncat", out, re.I), out
    assert str(size) in out, out
    assert last.stat().st_size == size
    check_values(s, want)
    # and the log goes on after the cut: one more reboot keeps everything
    with s.raw() as c:
        assert c.cmd("SET", "after", "cut") == "OK"
    want[b"after"] = b"cut"
    s.reboot()
    check_values(s, want)


def test_torn_group_at_the_tail_is_dropped_whole(durable):
    """A MULTI/EXEC group whose last frame never reached the file was never
    acknowledged: none of it comes back (a valid prefix ends before it)."""
    s = durable("always").start()
    with s.raw() as c:
        assert c.cmd("SET", "base", "1") == "OK"
        assert c.pipeline(("MULTI",), ("SET", "g1", "x"), ("SET", "g2", "y"), ("EXEC",))[-1] == ["OK", "OK"]
    assert s.shutdown() == 0
    last = log_files(s.dir)[-1]
    code, out = shoal("log", "dump", last)
    assert code == 0, out
    g2 = next(int(line.split()[0][4:]) for line in out.splitlines() if '"g2"' in line)
    # cut the file in the middle of the group's last record
    [g2_offset] = [off for off, lsn, _, _ in frames(last) if lsn == g2]
    with open(last, "r+b") as f:
        f.truncate(g2_offset + 20)
    code, out = shoal("log", "verify", last)
    assert code == 1, out
    s.remove_segment()
    s.start()
    with s.raw() as c:
        assert c.cmd("GET", "base") == b"1"
        assert c.pipeline(("EXISTS", "g1"), ("EXISTS", "g2")) == [0, 0]


# ---------------------------------------------------------------------------
# damage before the end


def test_flipped_bit_inside_an_earlier_log_file_stops_the_start(durable):
    s = durable("everysec", extra_args=["--log-file-size", "64k"]).start()
    fill(s, 400)  # about 400 KB of log: several files
    assert s.shutdown() == 0
    logs = log_files(s.dir)
    full = [f for f in logs[:-1] if len(frames(f)) >= 3]
    assert full, [(f.name, f.stat().st_size) for f in logs]
    victim = full[len(full) // 2]
    fr = frames(victim)
    off, lsn, n, _ = fr[len(fr) // 2]
    flip_bit(victim, off + FRAME_HEADER + n // 2)  # inside the payload: the CRC fails

    code, out = shoal("log", "verify", victim)
    assert code == 1, out
    assert verify_counts(out) == (len(fr) // 2, off), out
    assert str(off) in out, out

    s.remove_segment()
    code, out = s.start_failing()
    assert code != 0, out
    assert victim.name in out, out
    assert str(off) in out, out
    assert re.search(r"shoal log \w+", out), f"no repair command in:\n{out}"


def test_damaged_log_header_stops_the_start(durable):
    s = durable("everysec", extra_args=["--log-file-size", "64k"]).start()
    fill(s, 200)
    assert s.shutdown() == 0
    victim = log_files(s.dir)[0]
    flip_bit(victim, 3)  # the magic
    code, out = shoal("log", "verify", victim)
    assert code == 1, out
    s.remove_segment()
    code, out = s.start_failing()
    assert code != 0 and victim.name in out, out


# ---------------------------------------------------------------------------
# snapshots


def saved(s, n=300, prefix="k"):
    """Writes n keys, SAVE; returns the written values."""
    want = fill(s, n, prefix=prefix)
    with s.raw(timeout=120) as c:
        assert c.cmd("SAVE") == "OK"
    return want


def test_snapshot_verify_good_truncated_and_flipped(durable, tmp_path):
    s = durable("everysec").start()
    saved(s)
    assert s.shutdown() == 0
    [snap] = snapshots(s.dir)
    code, out = shoal("snapshot", "verify", snap)
    assert code == 0, out

    cut = tmp_path / snap.name
    shutil.copy(snap, cut)
    with open(cut, "r+b") as f:
        f.truncate(snap.stat().st_size - 100)
    code, out = shoal("snapshot", "verify", cut)
    assert code == 1, out
    assert re.search(r"trailer|truncat", out, re.I), out

    flipped = tmp_path / "flipped" / snap.name
    flipped.parent.mkdir()
    shutil.copy(snap, flipped)
    fr = frames(flipped, end=snap.stat().st_size - 32)
    off, _, n, _ = fr[len(fr) // 2]
    flip_bit(flipped, off + FRAME_HEADER + n // 2)
    code, out = shoal("snapshot", "verify", flipped)
    assert code == 1, out
    assert re.search(r"checksum|crc", out, re.I), out
    assert str(off) in out, out

    # the whole-file checksum alone: a byte of the trailer's count
    trailer = tmp_path / "trailer" / snap.name
    trailer.parent.mkdir()
    shutil.copy(snap, trailer)
    flip_bit(trailer, snap.stat().st_size - 32 + 8)
    code, out = shoal("snapshot", "verify", trailer)
    assert code == 1, out


@pytest.mark.parametrize("damage", ["truncated", "flipped"])
def test_bad_snapshot_with_the_whole_log_is_skipped(durable, damage):
    """The log from LSN 0 is still there (one run, one log file): the bad
    snapshot is reported and the log alone rebuilds the exact state, or the
    server refuses; it never loads the bad snapshot."""
    s = durable("everysec").start()
    saved(s)
    fill(s, 50, prefix="after")
    before = full_state(s)
    assert s.shutdown() == 0
    [snap] = snapshots(s.dir)
    damage_snapshot(snap, damage)
    s.remove_segment()
    start_or_refuse(s, snap, before)


def damage_snapshot(snap, damage):
    if damage == "truncated":
        with open(snap, "r+b") as f:
            f.truncate(snap.stat().st_size - 100)
    else:
        fr = frames(snap, end=snap.stat().st_size - 32)
        off, _, n, _ = fr[len(fr) // 2]
        flip_bit(snap, off + FRAME_HEADER + n // 2)


def start_or_refuse(s, snap, before):
    """Starting must either refuse, naming the bad snapshot, or start with
    exactly `before`, having said that the snapshot was bad."""
    s._spawn()
    while s.proc.poll() is None and not s.ready.is_set():
        s.ready.wait(0.05)
    if s.ready.is_set():
        out = s.text()
        assert snap.name in out, out
        assert not re.search(r"loaded snapshot \S*" + re.escape(snap.name), out), out
        after = full_state(s)
        assert after == before, state_diff(before, after)
    else:
        s.drainer.join(5)
        out = s.text()
        assert s.proc.returncode != 0, out
        assert snap.name in out, out
        s.proc = None


@pytest.mark.parametrize("damage", ["truncated", "flipped"])
def test_bad_snapshot_without_the_early_log_refuses(durable, damage):
    """The log files before the snapshot were pruned (--keep-logs 0): with
    the snapshot bad there is nothing to rebuild from, and the server must
    say so rather than start with part of the data."""
    s = durable("everysec").start()
    fill(s, 100, prefix="first-run")
    s.shutdown()
    s.start()  # a second log file
    saved(s, prefix="second-run")
    # SAVE answers once the snapshot is written; pruning follows it.
    wait_for(lambda: int(log_files(s.dir)[0].name[4:20], 16) > 0,
             what="the first run's log file to be pruned")
    assert s.shutdown() == 0
    [snap] = snapshots(s.dir)
    damage_snapshot(snap, damage)
    s.remove_segment()
    code, out = s.start_failing()
    assert code != 0, out
    assert snap.name in out, out
    assert re.search(r"trailer|truncat|checksum", out, re.I), out


def test_older_snapshot_is_used_when_the_newest_is_bad(durable, tmp_path):
    s = durable("everysec", extra_args=["--keep-logs", "100"]).start()
    saved(s, prefix="a")
    [older] = snapshots(s.dir)
    kept = tmp_path / older.name
    shutil.copy(older, kept)  # SAVE removes snapshots older than the new one
    saved(s, prefix="b")
    fill(s, 20, prefix="c")
    before = full_state(s)
    assert s.shutdown() == 0
    [newest] = snapshots(s.dir)
    assert newest.name != older.name
    shutil.copy(kept, older)
    damage_snapshot(newest, "flipped")
    s.remove_segment()
    s.start()
    out = s.text()
    assert newest.name in out, out
    assert re.search(r"loaded snapshot \S*" + re.escape(older.name), out), out
    after = full_state(s)
    assert after == before, state_diff(before, after)
