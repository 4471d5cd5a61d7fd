"""Ring-file readers: the pure-Python reader on synthesized files, and the
compiled reader agreeing with it (also on corrupted input)."""

import importlib
import os
import random
import sys

import pytest

from ringfile import RingBuilder
from xputimer import ring

GEMM, ALLREDUCE, ALLGATHER, PY_GC = 2, 16, 17, 64
BF16 = 3
HOST, DUR_US = 1 << 5, 1 << 4


def native_module():
    d = os.environ.get("XPU_TEST_NATIVE_DIR")
    if d and d not in sys.path:
        sys.path.insert(0, d)
    for name in ("xputimer._xputimer_native", "_xputimer_native"):
        try:
            return importlib.import_module(name)
        except ImportError:
            pass
    if os.environ.get("XPU_TEST_NATIVE_REQUIRED") == "1":
        pytest.fail("_xputimer_native was built but cannot be imported from %s" % d)
    pytest.skip("_xputimer_native not built (pure-Python reader only)")


def sample(tmp_path, wrap=True):
    b = RingBuilder(ring_capacity=8, sig_capacity=8)
    b.signature(1, GEMM, "cublasGemmEx", m=4096, n=4096, k=8192, batch=2, dtype=BF16)
    b.signature(2, ALLREDUCE, "ncclAllReduce", count=1 << 20, dtype=BF16, comm_nranks=8,
                comm_id=77, comm_rank=3)
    long_name = "module.with.a.very.long.name@SomeClass.some_method_with_a_long_name:" + "x" * 40
    b.signature(3, 69, long_name)
    b.signature(4, PY_GC, "gc", peer=2)
    b.signature(5, ALLGATHER, "bad", commit=9)                       # wrong commit word
    s6 = b.signature(6, 69, "y" * 80)
    s6.name_off = 4000                                              # outside str_used
    if wrap:
        for i in range(5):                                          # overwritten by wrap
            b.record(1, 1000 + i, 1)
    b.record(1, 2000, 100_000, flags=1)
    b.record(1, 2100, 300_000, flags=1)
    b.record(2, 2200, 5_000_000, seq=1, flags=1)
    b.record(4, 2300, 7, seq=12, flags=HOST | DUR_US)               # 7 us
    b.record(3, 2400, 50, flags=HOST)
    b.record(5, 2500, 1)                                            # signature invalid
    b.record(2, 2600, 1, commit=12345)                              # torn / in flight
    b.record(1, 2700, 200_000, flags=1)
    return b.write(tmp_path / "ring.bin"), long_name


def test_python_reader_values(tmp_path):
    path, long_name = sample(tmp_path)
    d = ring.read_ring(path)
    h = d["header"]
    assert (h["pid"], h["rank"], h["world_size"], h["job"], h["host"], h["job_name"]) == \
        (42, 3, 8, "job-7", "node-a", "llama")
    assert h["write_index"] == 13 and h["counters"][0] == 5 and h["counters"][14] == 9
    sigs = d["signatures"]
    assert set(sigs) == {1, 2, 3, 4, 6}
    assert sigs[1]["m"] == 4096 and sigs[1]["batch"] == 2 and sigs[1]["dtype"] == BF16
    assert sigs[2]["comm_id"] == 77 and sigs[2]["comm_nranks"] == 8
    assert sigs[3]["name"] == long_name                  # from the arena
    assert sigs[4]["peer"] == 2
    assert sigs[6]["name"] == "y" * 56                   # bad arena ref: inline prefix
    assert d["errors"] == {"uncommitted": 1, "bad_sig_id": 1, "bad_sig_entry": 1, "bad_name": 1}
    # positions 5..12 are in the ring (8 slots); 0..4 were overwritten
    assert [r["pos"] for r in d["records"]] == [5, 6, 7, 8, 9, 12]
    gc_rec = [r for r in d["records"] if r["sig_id"] == 4][0]
    assert gc_rec["duration_ns"] == 7000 and gc_rec["seq"] == 12


def test_python_stats(tmp_path):
    path, _ = sample(tmp_path)
    st = {s["sig_id"]: s for s in ring.stats(path)}
    gemm = st[1]
    assert gemm["count"] == 3 and gemm["median_ns"] == 200_000.0
    assert gemm["tflops"] == pytest.approx(2 * 4096 * 4096 * 8192 * 2 / 200_000e-9 / 1e12)
    ar = st[2]
    assert ar["count"] == 1 and ar["tflops"] is None
    size = (1 << 20) * 2
    assert ar["busbw_gbps"] == pytest.approx(size / 5e-3 * (2 * 7 / 8) / 1e9)
    assert st[4]["median_ns"] == 7000.0 and st[4]["busbw_gbps"] is None


def test_even_count_median(tmp_path):
    b = RingBuilder()
    b.signature(1, 69, "f")
    for d in (10, 40, 20, 30):
        b.record(1, 0, d)
    assert ring.stats(b.write(tmp_path / "r.bin"))[0]["median_ns"] == 25.0


@pytest.mark.parametrize("field,value,msg", [
    ("magic", 1, "magic"), ("abi_version", 2, "ABI"), ("record_size", 64, "size"),
    ("ring_capacity", 12, "power of two"), ("ring_capacity", 1 << 20, "outside"),
    ("sig_capacity", 1 << 28, "outside"), ("str_capacity", 1 << 40, "outside"),
    ("str_offset", 100, "outside"), ("ring_offset", (1 << 64) - 8, "outside"),
])
def test_bad_headers_raise_value_error(tmp_path, field, value, msg):
    b = RingBuilder()
    setattr(b.header, field, value)
    path = b.write(tmp_path / "bad.bin")
    with pytest.raises(ValueError, match=msg):
        ring.read_ring(path)


def test_truncated_file(tmp_path):
    p = tmp_path / "short.bin"
    p.write_bytes(b"XPURING1" + b"\0" * 100)
    with pytest.raises(ValueError):
        ring.read_ring(str(p))


def test_native_agrees_with_python(tmp_path):
    native = native_module()
    for wrap in (True, False):
        path, _ = sample(tmp_path, wrap=wrap)
        assert native.read_ring(path) == ring.read_ring(path)
        assert native.ring_stats(path) == ring.stats(path)


def test_native_agrees_on_real_trace(run_traced):
    native = native_module()
    run = run_traced("import gc\nfor g in (0, 1, 2, 0):\n    gc.collect(g)\n")
    assert native.read_ring(run.ring_path) == ring.read_ring(run.ring_path)
    assert native.ring_stats(run.ring_path) == ring.stats(run.ring_path)


def test_native_and_python_agree_on_corrupted_files(tmp_path):
    """Random byte flips (header included): both raise ValueError or both
    return the same thing; neither crashes."""
    native = native_module()
    path, _ = sample(tmp_path)
    good = open(path, "rb").read()
    rng = random.Random(1234)
    hot = list(range(0, 1200)) + list(range(4096, 4096 + 256)) + list(range(8192, 8192 + 1024))
    for i in range(300):
        buf = bytearray(good)
        for _ in range(rng.randint(1, 8)):
            buf[rng.choice(hot)] = rng.randrange(256)
        if i % 10 == 0:
            buf = buf[:rng.randrange(len(buf))]
        p = tmp_path / "fuzz.bin"
        p.write_bytes(bytes(buf))
        try:
            expect = ring.read_ring(str(p))
        except ValueError:
            with pytest.raises(ValueError):
                native.read_ring(str(p))
            continue
        assert native.read_ring(str(p)) == expect
        assert native.ring_stats(str(p)) == ring.stats(expect)


def test_cli_dump(tmp_path):
    import json
    import subprocess
    path, _ = sample(tmp_path)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-m", "xputimer", "ring", path, "--stats"], cwd=root,
                         capture_output=True, text=True, check=True)
    stats = json.loads(out.stdout)
    assert [s["sig_id"] for s in stats] == [1, 2, 3, 4]
