"""Synthesizes ring files per include/xpu/ring.h for the reader tests, with
ctypes mirrors of the C structs (an independent description of the layout:
the Python reader uses struct formats, the native reader the C header)."""

import ctypes as C

MAGIC = 0x31474E4952555058
PAGE = 4096


class Record(C.Structure):
    _fields_ = [("commit", C.c_uint32), ("sig_id", C.c_uint32), ("start_ns", C.c_uint64),
                ("duration", C.c_uint32), ("issue_latency_ns", C.c_int32), ("seq", C.c_uint32),
                ("stream", C.c_uint16), ("flags", C.c_uint16)]


class Signature(C.Structure):
    _fields_ = [("commit", C.c_uint32), ("kind", C.c_uint16), ("dtype", C.c_uint8),
                ("gemm_flags", C.c_uint8), ("name_off", C.c_uint32), ("name_len", C.c_uint32),
                ("m", C.c_uint32), ("n", C.c_uint32), ("k", C.c_uint32), ("batch", C.c_uint32),
                ("count", C.c_uint64), ("comm_id", C.c_uint64), ("comm_rank", C.c_int32),
                ("comm_nranks", C.c_int32), ("peer", C.c_int32), ("device", C.c_int32),
                ("out_dtype", C.c_uint8), ("compute_type", C.c_uint8), ("reserved0", C.c_uint16),
                ("reserved1", C.c_uint32), ("name", C.c_char * 56)]


class Header(C.Structure):
    _fields_ = [("magic", C.c_uint64), ("abi_version", C.c_uint32), ("header_size", C.c_uint32),
                ("record_size", C.c_uint32), ("signature_size", C.c_uint32),
                ("ring_capacity", C.c_uint32), ("sig_capacity", C.c_uint32),
                ("ring_offset", C.c_uint64), ("sig_offset", C.c_uint64),
                ("str_offset", C.c_uint64), ("str_capacity", C.c_uint64),
                ("file_size", C.c_uint64), ("pid", C.c_int32), ("rank", C.c_int32),
                ("local_rank", C.c_int32), ("world_size", C.c_int32),
                ("local_world_size", C.c_int32), ("device", C.c_int32),
                ("created_ns", C.c_uint64), ("start_time_ticks", C.c_uint64),
                ("job", C.c_char * 128), ("host", C.c_char * 64), ("job_name", C.c_char * 64),
                ("reserved_identity", C.c_uint8 * (1024 - 368)),
                # aligned(64) block at 1024
                ("write_index", C.c_uint64), ("sig_count", C.c_uint64), ("str_used", C.c_uint64),
                ("heartbeat_ns", C.c_uint64), ("producer_state", C.c_uint32),
                ("timing_policy", C.c_uint32), ("_pad0", C.c_uint8 * 24),
                ("read_index", C.c_uint64), ("_pad1", C.c_uint8 * 56),
                ("counters", C.c_uint64 * 32)]


assert C.sizeof(Record) == 32 and C.sizeof(Signature) == 128
assert Header.write_index.offset == 1024 and Header.read_index.offset == 1088
assert Header.counters.offset == 1152


def align(v):
    return (v + PAGE - 1) // PAGE * PAGE


class RingBuilder:
    def __init__(self, ring_capacity=16, sig_capacity=16, str_capacity=4096):
        self.ring_offset = PAGE
        self.sig_offset = align(PAGE + ring_capacity * 32)
        self.str_offset = align(self.sig_offset + sig_capacity * 128)
        self.size = align(self.str_offset + str_capacity)
        self.buf = bytearray(self.size)
        h = self.header
        h.magic, h.abi_version, h.header_size = MAGIC, 1, PAGE
        h.record_size, h.signature_size = 32, 128
        h.ring_capacity, h.sig_capacity = ring_capacity, sig_capacity
        h.ring_offset, h.sig_offset, h.str_offset = self.ring_offset, self.sig_offset, self.str_offset
        h.str_capacity, h.file_size = str_capacity, self.size
        h.pid, h.rank, h.local_rank, h.world_size, h.local_world_size, h.device = 42, 3, 1, 8, 4, 1
        h.created_ns = 1_700_000_000_000_000_000
        h.job, h.host, h.job_name = b"job-7", b"node-a", b"llama"
        h.producer_state = 1
        h.counters[0] = 5
        h.counters[14] = 9

    @property
    def header(self):
        return Header.from_buffer(self.buf, 0)

    def signature(self, sig_id, kind, name, commit=None, **fields):
        s = Signature.from_buffer(self.buf, self.sig_offset + sig_id * 128)
        raw = name.encode() if isinstance(name, str) else name
        s.kind = kind
        s.comm_rank, s.device, s.peer = -1, -1, -1
        for k, v in fields.items():
            setattr(s, k, v)
        s.name_len = len(raw)
        s.name = raw[:56]
        if len(raw) > 56:
            h = self.header
            off = h.str_used
            self.buf[self.str_offset + off:self.str_offset + off + len(raw)] = raw
            s.name_off = off
            h.str_used = off + len(raw)
        s.commit = sig_id if commit is None else commit
        h = self.header
        h.sig_count = max(h.sig_count, sig_id + 1)
        return s

    def record(self, sig_id, start_ns, duration, commit=None, **fields):
        h = self.header
        p = h.write_index
        r = Record.from_buffer(self.buf, self.ring_offset + (p % h.ring_capacity) * 32)
        r.sig_id, r.start_ns, r.duration = sig_id, start_ns, duration
        for k, v in fields.items():
            setattr(r, k, v)
        r.commit = (p + 1) & 0xFFFFFFFF if commit is None else commit
        h.write_index = p + 1
        return p

    def write(self, path):
        with open(path, "wb") as f:
            f.write(bytes(self.buf))
        return str(path)
