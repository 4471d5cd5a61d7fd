"""Pure-Python reader of a ring file (include/xpu/ring.h), for notebooks and
tests. Same output as the compiled _xputimer_native.read_ring / ring_stats.

The file is untrusted input: it is read once into memory (a snapshot, so a
live producer cannot change bytes under us), every offset and size is
checked against the real size, every sig_id against the table, every name
against the arena. Malformed entries are counted in result["errors"], never
raised; only a file whose header is unusable raises ValueError.

Output of read_ring(path):
  {"header": {...identity, indices, "counters": [32 ints]},
   "signatures": {sig_id: {"kind", "name", "dtype", "gemm_flags", "m", "n",
                  "k", "batch", "count", "comm_id", "comm_rank",
                  "comm_nranks", "peer", "device", "out_dtype",
                  "compute_type"}},
   "records": [{"pos", "sig_id", "start_ns", "duration_ns",
                "issue_latency_ns", "seq", "stream", "flags"}],   # in ring order
   "errors": {"uncommitted", "bad_sig_id", "bad_sig_entry", "bad_name"}}

callsites(data) joins the hook's call-site links (record.h,
XPU_OP_PY_CALLSITE) to the GEMM / collective launches they belong to.
"""

import struct

MAGIC = 0x31474E4952555058
ABI_VERSION = 1
HEADER_SIZE = 4096
RECORD_SIZE = 32
SIGNATURE_SIZE = 128
NAME_INLINE = 56
MAX_FILE_SIZE = 1 << 32  # refuse anything larger (a ring is a few MiB)

REC_DUR_US = 1 << 4
REC_PLUGIN = 1 << 8
OP_PY_CALLSITE = 72
OP_GEMM = 2
OP_ALLREDUCE, OP_ALLGATHER, OP_REDUCESCATTER, OP_BROADCAST, OP_REDUCE = 16, 17, 18, 19, 20
OP_ALLTOALL, OP_GATHER, OP_SCATTER, OP_SEND, OP_RECV = 21, 22, 23, 24, 25

# Header fields: (name, struct format, offset) per xpu_ring_header_v1.
_IDENTITY = struct.Struct("<QIIIIIIQQQQQiiiiiiQQ128s64s64s")  # offset 0, 368 bytes
_LIVE = struct.Struct("<QQQQII")                             # offset 1024
_READ_INDEX_OFF = 1088
_COUNTERS_OFF = 1152
_NUM_COUNTERS = 32
_SIG = struct.Struct("<IHBBIIIIIIQQiiiiBBHI56s")
_REC = struct.Struct("<IIQIiIHH")
assert _IDENTITY.size == 368 and _SIG.size == SIGNATURE_SIZE and _REC.size == RECORD_SIZE

_DTYPE_SIZE = {1: 4, 9: 4, 10: 4, 2: 2, 3: 2, 4: 8, 11: 8, 12: 8, 13: 8, 14: 16,
               5: 1, 6: 1, 7: 1, 8: 1}


def _cstr(raw):
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def parse(buf):
    """Parses the bytes of a ring file (see module doc)."""
    size = len(buf)
    if size < HEADER_SIZE:
        raise ValueError("ring file too small: %d bytes" % size)
    (magic, abi, header_size, record_size, signature_size, ring_cap, sig_cap, ring_off,
     sig_off, str_off, str_cap, file_size, pid, rank, local_rank, world_size,
     local_world_size, device, created_ns, start_ticks, job, host,
     job_name) = _IDENTITY.unpack_from(buf, 0)
    if magic != MAGIC:
        raise ValueError("bad magic")
    if abi != ABI_VERSION:
        raise ValueError("unsupported ABI version %d" % abi)
    if header_size != HEADER_SIZE or record_size != RECORD_SIZE or signature_size != SIGNATURE_SIZE:
        raise ValueError("unexpected header/record/signature size")
    if ring_cap == 0 or ring_cap & (ring_cap - 1):
        raise ValueError("ring capacity not a power of two")
    if ring_off < HEADER_SIZE or ring_off + ring_cap * RECORD_SIZE > size:
        raise ValueError("record slots outside the file")
    if sig_off < HEADER_SIZE or sig_off + sig_cap * SIGNATURE_SIZE > size:
        raise ValueError("signature table outside the file")
    if str_off < HEADER_SIZE or str_off + str_cap > size:
        raise ValueError("string arena outside the file")
    write_index, sig_count, str_used, heartbeat, producer_state, timing_policy = \
        _LIVE.unpack_from(buf, 1024)
    (read_index,) = struct.unpack_from("<Q", buf, _READ_INDEX_OFF)
    counters = list(struct.unpack_from("<%dQ" % _NUM_COUNTERS, buf, _COUNTERS_OFF))
    header = {
        "abi_version": abi, "ring_capacity": ring_cap, "sig_capacity": sig_cap,
        "str_capacity": str_cap, "file_size": file_size, "pid": pid, "rank": rank,
        "local_rank": local_rank, "world_size": world_size,
        "local_world_size": local_world_size, "device": device,
        "created_ns": created_ns, "start_time_ticks": start_ticks,
        "job": _cstr(job), "host": _cstr(host), "job_name": _cstr(job_name),
        "write_index": write_index, "read_index": read_index, "sig_count": sig_count,
        "str_used": str_used, "heartbeat_ns": heartbeat,
        "producer_state": producer_state, "timing_policy": timing_policy,
        "counters": counters,
    }
    errors = {"uncommitted": 0, "bad_sig_id": 0, "bad_sig_entry": 0, "bad_name": 0}
    arena_end = min(str_used, str_cap)

    sigs = {}
    for i in range(1, sig_cap):
        f = _SIG.unpack_from(buf, sig_off + i * SIGNATURE_SIZE)
        commit = f[0]
        if commit == 0:
            continue
        if commit != i:
            errors["bad_sig_entry"] += 1
            continue
        (_, kind, dtype, gemm_flags, name_off, name_len, m, n, k, batch, count, comm_id,
         comm_rank, comm_nranks, peer, dev, out_dtype, compute_type, _r0, _r1, inline) = f
        if name_len <= NAME_INLINE:
            name = inline[:name_len]
        elif name_off + name_len <= arena_end:
            name = buf[str_off + name_off:str_off + name_off + name_len]
        else:
            errors["bad_name"] += 1
            name = inline
        sigs[i] = {
            "kind": kind, "name": bytes(name).decode("utf-8", "replace"), "dtype": dtype,
            "gemm_flags": gemm_flags, "m": m, "n": n, "k": k, "batch": batch, "count": count,
            "comm_id": comm_id, "comm_rank": comm_rank, "comm_nranks": comm_nranks,
            "peer": peer, "device": dev, "out_dtype": out_dtype, "compute_type": compute_type,
        }

    records = []
    mask = ring_cap - 1
    first = write_index - ring_cap if write_index > ring_cap else 0
    for p in range(first, write_index):
        commit, sig_id, start_ns, dur, issue, seq, stream, flags = \
            _REC.unpack_from(buf, ring_off + (p & mask) * RECORD_SIZE)
        if commit != (p + 1) & 0xFFFFFFFF:
            errors["uncommitted"] += 1
            continue
        if sig_id not in sigs:
            errors["bad_sig_id"] += 1
            continue
        records.append({
            "pos": p, "sig_id": sig_id, "start_ns": start_ns,
            "duration_ns": dur * 1000 if flags & REC_DUR_US else dur,
            "issue_latency_ns": issue, "seq": seq, "stream": stream, "flags": flags,
        })
    return {"header": header, "signatures": sigs, "records": records, "errors": errors}


def read_ring(path):
    with open(path, "rb") as f:
        buf = f.read(MAX_FILE_SIZE + 1)
    if len(buf) > MAX_FILE_SIZE:
        raise ValueError("ring file larger than %d bytes" % MAX_FILE_SIZE)
    return parse(buf)


def sig_bytes(sig):
    """nccl-tests size in bytes (formulas.h xpu_sig_bytes)."""
    el = _DTYPE_SIZE.get(sig["dtype"], 0)
    n = sig["comm_nranks"] if sig["comm_nranks"] > 0 else 1
    kind = sig["kind"]
    if kind in (OP_ALLREDUCE, OP_BROADCAST, OP_REDUCE, OP_SEND, OP_RECV):
        return sig["count"] * el
    if kind in (OP_ALLGATHER, OP_REDUCESCATTER, OP_ALLTOALL, OP_GATHER, OP_SCATTER):
        return sig["count"] * n * el
    return 0


def busbw_factor(kind, nranks):
    n = float(nranks) if nranks > 0 else 1.0
    if kind == OP_ALLREDUCE:
        return 2.0 * (n - 1.0) / n
    if kind in (OP_ALLGATHER, OP_REDUCESCATTER, OP_ALLTOALL, OP_GATHER, OP_SCATTER):
        return (n - 1.0) / n
    if kind in (OP_BROADCAST, OP_REDUCE, OP_SEND, OP_RECV):
        return 1.0
    return 0.0


def sig_flops(sig):
    if sig["kind"] != OP_GEMM:
        return 0.0
    b = float(sig["batch"]) if sig["batch"] else 1.0
    return 2.0 * float(sig["m"]) * float(sig["n"]) * float(sig["k"]) * b


def stats(data):
    """Per-signature stats, sorted by sig_id: count, median and total duration
    (ns), TFLOPS at the median duration for GEMMs, bus bandwidth (GB/s) at
    the median for collectives (formulas.h). `data` is read_ring() output or
    a path."""
    if not isinstance(data, dict):
        data = read_ring(data)
    durations = {}
    for r in data["records"]:
        durations.setdefault(r["sig_id"], []).append(r["duration_ns"])
    out = []
    for sig_id in sorted(durations):
        sig = data["signatures"][sig_id]
        d = sorted(durations[sig_id])
        n = len(d)
        median = float(d[n // 2]) if n % 2 else (float(d[n // 2 - 1]) + float(d[n // 2])) / 2.0
        tflops = None
        busbw = None
        if median > 0 and sig["kind"] == OP_GEMM:
            tflops = sig_flops(sig) / median / 1e3
        if median > 0 and OP_ALLREDUCE <= sig["kind"] <= OP_RECV:
            busbw = float(sig_bytes(sig)) / median * busbw_factor(sig["kind"], sig["comm_nranks"])
        out.append({"sig_id": sig_id, "name": sig["name"], "kind": sig["kind"], "count": n,
                    "median_ns": median, "total_ns": sum(d), "tflops": tflops,
                    "busbw_gbps": busbw})
    return out


def callsites(data):
    """The Python call stacks of sampled launches, joined exactly to their
    launch records. `data` is read_ring() output (either reader) or a path.

    A link record (kind XPU_OP_PY_CALLSITE, issue_latency_ns = the launch's
    sig_id > 0) names the launch by (sig_id, seq, stream); the launch is the
    record with that key and without XPU_REC_PLUGIN (record.h). Returns one
    dict per link, in ring order:
      {"stack_sig_id", "frames": ["qualname@file:line", ...] innermost first,
       "launch_sig_id", "seq", "stream", "start_ns" (CPU launch time),
       "launch": the launch record (a dict of data["records"]) or None when
                 it is not in the file (overwritten, or still in flight)}
    Free-standing call-site events (emit_callsite, issue_latency_ns == 0)
    are not links and are left out."""
    if not isinstance(data, dict):
        data = read_ring(data)
    sigs = data["signatures"]
    launches = {}
    links = []
    for r in data["records"]:
        kind = sigs[r["sig_id"]]["kind"]
        if kind == OP_PY_CALLSITE:
            if r["issue_latency_ns"] > 0:
                links.append(r)
        elif not r["flags"] & REC_PLUGIN:
            launches.setdefault((r["sig_id"], r["seq"], r["stream"]), []).append(r)
    out = []
    for l in links:
        key = (l["issue_latency_ns"], l["seq"], l["stream"])
        cands = launches.get(key, ())
        # One candidate unless seq wrapped around: the nearest in time wins.
        launch = min(cands, key=lambda c: abs(c["start_ns"] - l["start_ns"])) if cands else None
        out.append({"stack_sig_id": l["sig_id"], "frames": sigs[l["sig_id"]]["name"].split(";"),
                    "launch_sig_id": key[0], "seq": l["seq"], "stream": l["stream"],
                    "start_ns": l["start_ns"], "launch": launch})
    return out
