/*
 * xpu/record.h — the XPUTimer record ABI, version 1.
 *
 * This header is the specification. It is plain C, fixed-width types only, so
 * that the hook (inside the training process), the daemon, the engine, the
 * tools and the Python package agree byte for byte. Every struct has a
 * static_assert'ed size. Zero bytes mean "empty": freshly mapped memory is a
 * valid, empty ring and an empty signature table.
 *
 * Writers: only libxpu_hook.so (and the NCCL profiler plugin through the hook's
 * C API) write records. Readers (daemon, tools) treat every byte as untrusted
 * input: they copy a record out before looking at it, validate sig_id against
 * the signature table, and count anything malformed instead of failing.
 *
 * Clock: every *_ns timestamp is host CLOCK_REALTIME in nanoseconds since the
 * Unix epoch. GPU timestamps are mapped into that domain by the hook with a
 * periodically re-calibrated reference event (see docs/record-abi.md).
 */
#ifndef XPU_RECORD_H_
#define XPU_RECORD_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define XPU_RECORD_ABI_VERSION 1u

/* ---------------------------------------------------------------------------
 * Record: 32 bytes, one per traced op occurrence.
 *
 *   byte  0        4        8                16       20       24       28   30   32
 *         +--------+--------+----------------+--------+--------+--------+----+----+
 *         | commit | sig_id |   start_ns     |duration|issue_la|  seq   |strm|flag|
 *         +--------+--------+----------------+--------+--------+--------+----+----+
 *
 * commit   Slot sequence word (see ring.h). Written LAST with a release store;
 *          a reader acquire-loads it and accepts the slot only if it equals the
 *          value expected for that ring position. 0 = never written.
 * sig_id   Interned op signature (signature table index, >= 1; 0 is invalid).
 * start_ns Host-clock ns of the GPU start (XPU_REC_TIMED), else the CPU launch
 *          / call entry time.
 * duration GPU duration in ns (or in us when XPU_REC_DUR_US is set). For
 *          XPU_REC_NOT_TIMED ops: completion-observed minus launch time (an
 *          upper bound). Saturates at 0xFFFFFFFF with XPU_REC_DUR_SATURATED.
 * issue_latency_ns  GPU start minus CPU launch time, valid only with
 *          XPU_REC_ISSUE_LAT_VALID; saturates to INT32_MIN/INT32_MAX. (A
 *          call-site link carries its launch's sig_id here, without the flag.)
 * seq      Collectives and point-to-point: the per-communicator sequence
 *          number (1-based, counted by the hook per communicator in issue
 *          order; ranks of one communicator agree on it). Kernels/GEMMs: the
 *          per-stream launch sequence. Host events: an event-specific value
 *          (GC: objects collected; step marker: step id; call-site link:
 *          the launch's seq, see XPU_OP_PY_CALLSITE).
 * stream   Interned stream index (0 = legacy default stream) for GPU ops; the
 *          interned thread index for host events (call-site link: the
 *          launch's stream).
 * flags    XPU_REC_* below.
 * ------------------------------------------------------------------------- */
typedef struct xpu_record_v1 {
  uint32_t commit;
  uint32_t sig_id;
  uint64_t start_ns;
  uint32_t duration;
  int32_t issue_latency_ns;
  uint32_t seq;
  uint16_t stream;
  uint16_t flags;
} xpu_record_v1;

enum xpu_record_flags {
  XPU_REC_TIMED = 1u << 0,           /* start/duration measured on the GPU */
  XPU_REC_NOT_TIMED = 1u << 1,       /* completion-tracked only (no timing event) */
  XPU_REC_SAMPLED = 1u << 2,         /* this occurrence was picked by the sampler */
  XPU_REC_DUR_SATURATED = 1u << 3,   /* true duration exceeds what the field holds */
  XPU_REC_DUR_US = 1u << 4,          /* duration is in microseconds, not ns */
  XPU_REC_HOST = 1u << 5,            /* host-side event (Python API, sync call) */
  XPU_REC_ISSUE_LAT_VALID = 1u << 6, /* issue_latency_ns holds a measured value */
  XPU_REC_GRAPH_CAPTURE = 1u << 7,   /* launched into a stream under graph capture */
  XPU_REC_PLUGIN = 1u << 8,          /* timed by the NCCL profiler plugin. Such a
                                        record is a timing SUPPLEMENT: the
                                        interposer wrote the occurrence itself
                                        (same sig_id and seq, XPU_REC_NOT_TIMED).
                                        Count occurrences from non-plugin
                                        records; take timing from the plugin one. */
  XPU_REC_CALL_FAILED = 1u << 9,     /* the intercepted call returned an error */
  XPU_REC_INCOMPLETE = 1u << 10,     /* never observed complete (flushed at exit) */
  XPU_REC_BEGIN = 1u << 11,          /* host interval opened (paired with END) */
  XPU_REC_END = 1u << 12,            /* host interval closed */
  XPU_REC_UNTRACKED = 1u << 13,      /* GPU op not completion-tracked (no timing
                                        event for a sampled op, no room in the
                                        hook's queues): start is the CPU launch,
                                        duration the CPU call; or no completion
                                        evidence came in time (duration 0) */
  XPU_REC_PROFILE_WINDOW = 1u << 14  /* written during a profiling window
                                        (ring.h, xpu_ring_profile_ctl_v1) from
                                        a CUPTI activity record: a GPU kernel
                                        execution, always XPU_REC_TIMED, kind
                                        XPU_OP_KERNEL, name = kernel symbol.
                                        Not an occurrence of a traced op (the
                                        interposers' records of the same work
                                        stay authoritative for counts); `seq`
                                        holds CUPTI's correlation id and
                                        `stream` CUPTI's stream id (saturated
                                        at 65535), not the hook's interned
                                        index. Readers summarize these on the
                                        node; the daemon does not forward them. */
};

/* ---------------------------------------------------------------------------
 * Op kinds (stored in the signature, not in the record).
 * ------------------------------------------------------------------------- */
enum xpu_op_kind {
  XPU_OP_NONE = 0,
  XPU_OP_KERNEL = 1,       /* plain kernel launch; name = kernel symbol */
  XPU_OP_GEMM = 2,         /* cuBLAS / cuBLASLt; name = API name */
  XPU_OP_GRAPH_LAUNCH = 3, /* cudaGraphLaunch */
  XPU_OP_MEMCPY = 4,       /* synchronous cudaMemcpy kinds */

  XPU_OP_ALLREDUCE = 16, /* collectives: 16..31 */
  XPU_OP_ALLGATHER = 17,
  XPU_OP_REDUCESCATTER = 18,
  XPU_OP_BROADCAST = 19,
  XPU_OP_REDUCE = 20,
  XPU_OP_ALLTOALL = 21,
  XPU_OP_GATHER = 22,
  XPU_OP_SCATTER = 23,
  XPU_OP_SEND = 24,
  XPU_OP_RECV = 25,

  XPU_OP_SYNC_STREAM = 40, /* host-blocking synchronization APIs */
  XPU_OP_SYNC_DEVICE = 41,
  XPU_OP_SYNC_EVENT = 42,

  XPU_OP_COMM_INIT = 48, /* communicator lifecycle (no duration) */
  XPU_OP_COMM_DESTROY = 49,

  XPU_OP_PY_GC = 64, /* Python host events: 64..95 */
  XPU_OP_PY_DATALOADER = 65,
  XPU_OP_PY_SYNC = 66,
  XPU_OP_PY_OPTIMIZER = 67,
  XPU_OP_PY_CHECKPOINT = 68,
  XPU_OP_PY_API = 69,     /* user-configured API (XPU_TRACED_PYTHON_API) */
  XPU_OP_STEP = 70,       /* step marker: seq = step id */
  XPU_OP_ANNOTATION = 71, /* user region */
  XPU_OP_PY_CALLSITE = 72 /* Python call stack of a launch (below) */
};

static inline int xpu_op_is_collective(uint32_t kind) {
  return kind >= XPU_OP_ALLREDUCE && kind <= XPU_OP_RECV;
}
static inline int xpu_op_is_host(uint32_t kind) {
  return (kind >= XPU_OP_SYNC_STREAM && kind <= XPU_OP_SYNC_EVENT) ||
         (kind >= XPU_OP_PY_GC && kind < 96);
}

/* ---------------------------------------------------------------------------
 * Call sites (XPU_OP_PY_CALLSITE).
 *
 * Signature: names one Python call stack, frames "qualname@filename:line"
 * joined by ';', innermost first (qualname = co_qualname, co_name before
 * Python 3.11; filename = co_filename; line = the frame's current line).
 * peer = 0, comm_rank = -1, device = -1, every other field 0: the hook and
 * xputimer.callsite_sig() (python/xputimer/callsite.py) build the same name
 * and fields, so one stack interns to one sig_id whichever side saw it first.
 *
 * Record: a zero-length host event (XPU_REC_HOST, duration 0). Two uses:
 *
 *  - LINK, written by the hook for a launch the sampler picked (a GEMM, a
 *    collective or a send/recv issued by a thread holding the GIL):
 *      start_ns          CPU launch time of the op
 *      issue_latency_ns  sig_id of the launch (>= 1). XPU_REC_ISSUE_LAT_VALID
 *                        is never set here, so readers that honour the flag
 *                        never mistake it for a latency.
 *      seq, stream       copied from the launch's record
 *    The launch is THE record whose (sig_id, seq, stream) equals
 *    (issue_latency_ns, seq, stream) and that has no XPU_REC_PLUGIN (a
 *    plugin record of the same occurrence shares sig_id and seq). The key
 *    needs all three: seq alone counts per communicator for collectives and
 *    per stream for kernels/GEMMs. The link is written by the launching
 *    thread right after the real call returns, the launch record by the
 *    completion thread once the GPU is done: in ring order the link usually
 *    comes FIRST. Join by key, never by position.
 *  - free-standing (issue_latency_ns == 0): emitted from Python
 *    (xputimer.emit_callsite); seq = user value, stream = thread index, as
 *    for every host event. Not tied to a launch.
 * ------------------------------------------------------------------------- */
static inline uint32_t xpu_callsite_launch_sig_id(const xpu_record_v1* r) {
  return r->issue_latency_ns > 0 ? (uint32_t)r->issue_latency_ns : 0u;
}

/* Data types (our own numbering, independent of CUDA/NCCL enums). */
enum xpu_dtype {
  XPU_DT_UNKNOWN = 0,
  XPU_DT_F32 = 1,
  XPU_DT_F16 = 2,
  XPU_DT_BF16 = 3,
  XPU_DT_F64 = 4,
  XPU_DT_F8_E4M3 = 5,
  XPU_DT_F8_E5M2 = 6,
  XPU_DT_I8 = 7,
  XPU_DT_U8 = 8,
  XPU_DT_I32 = 9,
  XPU_DT_U32 = 10,
  XPU_DT_I64 = 11,
  XPU_DT_U64 = 12,
  XPU_DT_C32 = 13, /* complex float */
  XPU_DT_C64 = 14  /* complex double */
};

static inline uint32_t xpu_dtype_size(uint32_t dt) {
  switch (dt) {
    case XPU_DT_F32:
    case XPU_DT_I32:
    case XPU_DT_U32:
      return 4;
    case XPU_DT_F16:
    case XPU_DT_BF16:
      return 2;
    case XPU_DT_F64:
    case XPU_DT_I64:
    case XPU_DT_U64:
    case XPU_DT_C32:
      return 8;
    case XPU_DT_C64:
      return 16;
    case XPU_DT_F8_E4M3:
    case XPU_DT_F8_E5M2:
    case XPU_DT_I8:
    case XPU_DT_U8:
      return 1;
    default:
      return 0;
  }
}

/* ---------------------------------------------------------------------------
 * Signature: 128 bytes, one per distinct op shape. Interned once by the hook
 * into the signature table of the ring file; records refer to it by sig_id.
 *
 * GEMM fields follow cuBLAS column-major conventions: C[m x n] = op(A)[m x k]
 * * op(B)[k x n], batch >= 1. Collective fields: count elements of dtype, bytes
 * = the nccl-tests "size" (see xpu_sig_bytes in formulas.h), comm_id is equal
 * on every member of the communicator.
 * ------------------------------------------------------------------------- */
#define XPU_SIG_NAME_INLINE 56

typedef struct xpu_signature_v1 {
  uint32_t commit;    /* sig_id once published (release-stored last); 0 = empty */
  uint16_t kind;      /* xpu_op_kind */
  uint8_t dtype;      /* xpu_dtype of A/B (GEMM) or of the buffer (collectives) */
  uint8_t gemm_flags; /* XPU_GEMM_TRANSA | XPU_GEMM_TRANSB */
  uint32_t name_off;  /* name in the string arena if name_len > XPU_SIG_NAME_INLINE */
  uint32_t name_len;  /* bytes, no terminator */
  uint32_t m, n, k, batch;
  uint64_t count;       /* collective element count (per rank, as passed to NCCL) */
  uint64_t comm_id;     /* communicator identity, equal across its members */
  int32_t comm_rank;    /* rank in the communicator, -1 if none */
  int32_t comm_nranks;  /* communicator size, 0 if none */
  int32_t peer;         /* send/recv peer, root of broadcast/reduce, else -1 */
  int32_t device;       /* CUDA device ordinal, -1 unknown */
  uint8_t out_dtype;    /* GEMM C/D dtype */
  uint8_t compute_type; /* GEMM compute type (xpu_dtype; XPU_DT_F32 for tf32 too) */
  uint16_t reserved0;
  uint32_t reserved1;
  char name[XPU_SIG_NAME_INLINE]; /* inline copy / prefix of the name */
} xpu_signature_v1;

enum xpu_gemm_flags { XPU_GEMM_TRANSA = 1u << 0, XPU_GEMM_TRANSB = 1u << 1 };

#ifdef __cplusplus
} /* extern "C" */
static_assert(sizeof(xpu_record_v1) == 32, "record ABI is 32 bytes");
static_assert(sizeof(xpu_signature_v1) == 128, "signature ABI is 128 bytes");
#else
_Static_assert(sizeof(xpu_record_v1) == 32, "record ABI is 32 bytes");
_Static_assert(sizeof(xpu_signature_v1) == 128, "signature ABI is 128 bytes");
#endif

#endif /* XPU_RECORD_H_ */
