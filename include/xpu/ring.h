/*
 * xpu/ring.h — the shared-memory ring file, ABI version 1.
 *
 * One ring file per traced process, created by the hook with memfd_create and
 * handed to the node daemon over a Unix socket (see transport.h). Layout,
 * all offsets in bytes from the start of the file, all sections page aligned:
 *
 *   0                 +-----------------------------+
 *                     | xpu_ring_header_v1 (4096)   |  identity, indices, counters
 *   ring_offset       +-----------------------------+
 *                     | record slots                |  ring_capacity x 32 bytes
 *   sig_offset        +-----------------------------+
 *                     | signature table             |  sig_capacity x 128 bytes
 *   str_offset        +-----------------------------+
 *                     | string arena                |  str_capacity bytes
 *   file size         +-----------------------------+
 *
 * Ownership and ordering (no cross-process lock exists anywhere):
 *  - The producer (hook) owns everything except `read_index` and the
 *    consumer block (xpu_ring_consumer_v1 below), which the consumer
 *    (daemon) owns, and the request half of the profiling-window control. Identity fields are written once before the file
 *    is handed over and never change.
 *  - Producing a record: reserve position p by a CAS on write_index that
 *    fails when p - read_index >= ring_capacity (then `dropped_full` is
 *    incremented and the record is lost: a full ring drops and counts). Write
 *    the payload into slot p % ring_capacity, then release-store
 *    commit = (uint32_t)(p + 1). Zero therefore never marks a written slot.
 *  - Consuming: for position p, acquire-load slot.commit; if it equals
 *    (uint32_t)(p + 1) copy the slot out, re-check commit (it must still be
 *    equal, otherwise the producer lapped the reader: count it), then advance.
 *    A slot whose commit is not yet equal is either in flight or was abandoned
 *    by a crashed producer; after `write_index` has moved past it for a grace
 *    period the reader skips it and counts it.
 *  - Signatures: entry i (1 <= i < sig_capacity; entry 0 unused) is valid
 *    when its `commit` equals i. Written once, commit release-stored last.
 *    `sig_count` is a hint (highest published id + 1), not a guarantee.
 *  - Strings: append-only; `str_used` is advanced with a release store after
 *    the bytes are written. Names are referenced by (offset, length).
 *  - The reader validates every offset and size against the real file size
 *    (fstat), every sig_id against sig_capacity, and never trusts a length.
 *  - Indices that cannot be right (write_index behind the reader, more than
 *    a lap ahead of read_index, or far ahead of the records the hook counts
 *    as written) mean the page was corrupted: the reader resynchronizes at
 *    write_index, stores it as read_index (so the producer can write again),
 *    and counts the records it could not read (XPU_LOSS_RESYNC, derived
 *    from counters[XPU_CNT_RECORDS_WRITTEN], at most one ring's worth).
 */
#ifndef XPU_RING_H_
#define XPU_RING_H_

#include <stdint.h>

#include "xpu/record.h"

#ifdef __cplusplus
extern "C" {
#endif

#define XPU_RING_MAGIC 0x31474e4952555058ull /* "XPURING1" little-endian */
#define XPU_RING_HEADER_SIZE 4096u
#define XPU_RING_DEFAULT_CAPACITY (1u << 16) /* records; power of two */
#define XPU_RING_DEFAULT_SIG_CAPACITY 4096u
#define XPU_RING_DEFAULT_STR_CAPACITY (1u << 20)

/* Producer states (header.producer_state). */
enum xpu_producer_state {
  XPU_PRODUCER_NONE = 0,
  XPU_PRODUCER_ACTIVE = 1,
  XPU_PRODUCER_DISABLED = 2, /* e.g. forked child, XPU_ENABLE=0 */
  XPU_PRODUCER_EXITED = 3    /* clean process exit; all pending ops flushed */
};

/* Counters the hook bumps instead of failing (header.counters[]). */
enum xpu_counter {
  XPU_CNT_DROPPED_FULL = 0,      /* records lost: ring full */
  XPU_CNT_SIG_TABLE_FULL = 1,    /* signatures not interned: table full */
  XPU_CNT_STR_ARENA_FULL = 2,    /* names truncated to the inline prefix */
  XPU_CNT_EVENT_POOL_EMPTY = 3,  /* op not completion-tracked: no free event */
  XPU_CNT_PENDING_FULL = 4,      /* op not tracked: pending queue full */
  XPU_CNT_CUDA_ERROR = 5,        /* a CUDA call made by the hook itself failed */
  XPU_CNT_SYMBOL_MISSING = 6,    /* real symbol could not be resolved */
  XPU_CNT_REENTRANT = 7,         /* calls passed through by the reentrancy guard */
  XPU_CNT_CAPTURE_SKIPPED = 8,   /* ops not timed: stream under graph capture */
  XPU_CNT_LAUNCHES_UNTRACED = 9, /* plain kernel launches counted, not recorded */
  XPU_CNT_RECORDS_WRITTEN = 10,
  XPU_CNT_SAMPLED = 11, /* ops timed by the sampler */
  XPU_CNT_DAEMON_CONNECT_FAIL = 12,
  XPU_CNT_PLUGIN_EVENTS = 13, /* events received from the NCCL profiler plugin */
  XPU_CNT_PY_EVENTS = 14,     /* host events from the Python side */
  XPU_CNT_INTERNAL = 15,      /* any other internal failure */
  XPU_CNT_RING_NOT_SEALED = 16,   /* the memfd could not be sealed against shrinking */
  XPU_CNT_RING_FILE_REFUSED = 17, /* XPU_RING_DIR not private: a sealed memfd was used */
  XPU_CNT_HOLD_TIMEOUT = 18,  /* stream holds released by the timeout (docs/timing-policy.md) */
  XPU_CNT_UNCOVERED = 19,     /* ops retired without observed completion (XPU_REC_UNTRACKED) */
  XPU_CNT_RING_TRUNCATED = 20, /* SIGBUS from a truncated ring file answered with anonymous pages */
  XPU_CNT_MAX = 32
};

typedef struct xpu_ring_header_v1 {
  /* --- identity and layout: written once by the producer before hand-over. */
  uint64_t magic;          /* XPU_RING_MAGIC */
  uint32_t abi_version;    /* XPU_RECORD_ABI_VERSION */
  uint32_t header_size;    /* XPU_RING_HEADER_SIZE */
  uint32_t record_size;    /* sizeof(xpu_record_v1) */
  uint32_t signature_size; /* sizeof(xpu_signature_v1) */
  uint32_t ring_capacity;  /* records, power of two */
  uint32_t sig_capacity;   /* entries (entry 0 unused) */
  uint64_t ring_offset;
  uint64_t sig_offset;
  uint64_t str_offset;
  uint64_t str_capacity;
  uint64_t file_size;
  int32_t pid;
  int32_t rank;              /* RANK, -1 if unknown */
  int32_t local_rank;        /* LOCAL_RANK, -1 if unknown */
  int32_t world_size;        /* WORLD_SIZE, 0 if unknown */
  int32_t local_world_size;  /* LOCAL_WORLD_SIZE, 0 if unknown */
  int32_t device;            /* CUDA device at first traced op, -1 unknown */
  uint64_t created_ns;       /* CLOCK_REALTIME at creation */
  uint64_t start_time_ticks; /* /proc/self/stat starttime: tells pid reuse apart */
  char job[128];     /* job id (TORCHELASTIC_RUN_ID, SLURM_JOB_ID, XPU_JOB, or "pid-<pid>@host") */
  char host[64];     /* hostname */
  char job_name[64]; /* XPU_JOB_NAME, for history across runs */
  /* GPU model, cudaGetDeviceProperties(device).name: the one identity field
   * written AFTER hand-over, once, by the hook's completion thread when the
   * first traced op has set `device` (hook/tracing/gpu_model.cc). The writer stores
   * bytes 1..63 (NUL-terminated, printable ASCII) first and byte 0 last with
   * a release store; a reader acquire-loads byte 0 and copies the field only
   * when it is non-zero. All zero: not known yet (or an older hook). */
  char gpu_model[64];
  /* The same GPU's UUID as NVML prints it ("GPU-" and 36 characters of the
   * 16 UUID bytes) and PCI bus id ("%08X:%02X:%02X.0": domain, bus, device),
   * NUL-terminated. Written by the same writer BEFORE the release store of
   * gpu_model[0], so a reader that saw gpu_model[0] non-zero (acquire) sees
   * them complete; empty when the runtime did not report them. */
  char gpu_uuid[48];
  char gpu_pci_bus_id[32];
  uint8_t reserved_identity[1024 - 512]; /* keeps write_index at offset 1024 */

  /* --- producer-owned, live. */
  uint64_t write_index __attribute__((aligned(64))); /* next position to reserve */
  uint64_t sig_count;                                /* hint: highest published sig_id + 1 */
  uint64_t str_used;       /* bytes of the string arena in use (release) */
  uint64_t heartbeat_ns;   /* bumped by the hook's background thread (~10 Hz) */
  uint32_t producer_state; /* xpu_producer_state */
  uint32_t timing_policy;  /* 0 sampled, 1 all, 2 off */
  /* --- consumer-owned. */
  uint64_t read_index __attribute__((aligned(64))); /* next position to consume */
  /* --- producer-owned counters (relaxed atomics), xpu_counter. */
  uint64_t counters[XPU_CNT_MAX] __attribute__((aligned(64)));
  /* --- per-communicator progress for hang diagnosis lives after the counters
   *     (added in a later ABI minor; readers ignore bytes they do not know):
   *     xpu_ring_progress_v1 at XPU_RING_PROGRESS_OFFSET, and the
   *     profiling-window control xpu_ring_profile_ctl_v1 at
   *     XPU_RING_PROFILE_OFFSET, see below. */
} xpu_ring_header_v1;

/* ---------------------------------------------------------------------------
 * Hang-watch progress table (ABI 1, minor "progress 1"), in the header page:
 *
 *   0 .. sizeof(xpu_ring_header_v1)   the header above
 *   XPU_RING_PROGRESS_OFFSET (2048)   xpu_ring_progress_v1 (1088 bytes)
 *
 * Writer: the hook's completion thread only (hook/tracing/hang_watch.cc), single
 * writer, so no CAS. Readers: the daemon (daemon/evidence/ring_progress.cc),
 * tools. Zero bytes mean "no table" (magic 0): an older hook leaves it zero.
 *
 * Each comm entry and the suspect block are guarded by a sequence word
 * (`gen`): the writer stores gen+1 (odd, release), the fields, then gen+2
 * (even, release). A reader acquire-loads gen, copies, re-loads gen and
 * accepts the copy when both loads are equal and even; otherwise it retries
 * a few times and then reports the entry as unreadable. The reader validates
 * every field (slot counts, kinds) and never trusts them.
 *
 * Semantics per communicator (comm_id as in xpu_signature_v1):
 *   last_issued_seq     highest collective seq handed to the completion thread
 *   last_completed_seq  highest collective seq observed complete (or failed)
 *   pending_*           the oldest collective still outstanding on the comm
 *                       (pending_seq 0: none)
 * Suspect block: set when an op (any traced GPU op, collective or not) has
 * been outstanding for longer than max(floor, multiple x the recent maximum
 * duration of its signature); cleared when it completes. `suspect_stream`
 * is the stream of the op as the records number it (record.h `stream`). `suspect_since_ns`
 * is the op's launch time (host clock), `detected_ns` when the hook noticed.
 * ------------------------------------------------------------------------- */
#define XPU_RING_PROGRESS_OFFSET 2048u
#define XPU_RING_PROGRESS_MAGIC 0x31475250u /* "PRG1" */
#define XPU_RING_PROGRESS_COMMS 16u

typedef struct xpu_comm_progress_v1 {
  uint32_t gen;            /* sequence word, see above */
  uint32_t pending_sig_id; /* signature of the oldest outstanding collective */
  uint64_t comm_id;        /* 0 = unused entry */
  uint32_t last_issued_seq;
  uint32_t last_completed_seq;
  uint32_t pending_seq;      /* 0 = nothing outstanding */
  uint16_t pending_kind;     /* xpu_op_kind */
  uint16_t flags;            /* XPU_PROGRESS_* */
  uint64_t pending_bytes;    /* count x dtype size of the outstanding op */
  uint64_t pending_since_ns; /* its CPU launch time */
  int32_t comm_rank;
  int32_t comm_nranks;
  uint64_t updated_ns; /* last change of this entry */
} xpu_comm_progress_v1;

enum xpu_progress_flags {
  XPU_PROGRESS_SUSPECT = 1u << 0 /* the outstanding op exceeds its threshold */
};

typedef struct xpu_ring_progress_v1 {
  uint32_t magic;               /* XPU_RING_PROGRESS_MAGIC once initialised */
  uint32_t ncomms;              /* XPU_RING_PROGRESS_COMMS; entries in use: comm_id != 0 */
  uint32_t suspect_gen;         /* sequence word of the suspect block */
  uint32_t suspect_sig_id;      /* 0 = no suspected hang */
  uint64_t suspect_since_ns;    /* launch time of the overdue op */
  uint64_t suspect_detected_ns; /* when the threshold was crossed */
  uint64_t suspect_threshold_ns;
  uint32_t suspect_seq;
  uint16_t suspect_kind;
  uint16_t suspect_stream; /* the hook's stream index of the overdue op (was
                              reserved, zero from older hooks) */
  uint64_t suspect_comm_id;                            /* 0 for a non-collective op */
  uint64_t suspects_total;                             /* suspicions raised since start */
  xpu_comm_progress_v1 comms[XPU_RING_PROGRESS_COMMS]; /* overflow: ignored, not counted */
} xpu_ring_progress_v1;

/* ---------------------------------------------------------------------------
 * Consumer state (ABI 1, minor "consumer 1"), in the header page:
 *
 *   XPU_RING_CONSUMER_OFFSET (1536)   xpu_ring_consumer_v1 (128 bytes)
 *
 * Writer: the consumer (the node daemon) only; the hook never writes it and
 * never reads it. It keeps what the consumer must not forget when it is
 * restarted while the process runs on: how far the engine has acknowledged
 * the process's records, and every record lost after the hook wrote it, by
 * reason. It lives in the ring because the ring outlives the daemon, so the
 * counts are cumulative over daemon restarts. Zero bytes (magic 0) mean no
 * consumer state: an older daemon, or none yet.
 *
 *  acked_index     positions below it are settled: their records reached
 *                  the engine (acknowledged) or were counted in lost[]. A
 *                  restarted consumer resumes reading at acked_index (not at
 *                  read_index), so records that a killed daemon had read but
 *                  not delivered are read again; those the hook has
 *                  overwritten meanwhile count as XPU_LOSS_RESTART.
 *  position_bias   positions that stand for no record of the hook (skipped
 *                  when corrupted indices forced a resynchronization):
 *                  records accounted = cursor - position_bias (mod 2^64),
 *                  comparable with counters[XPU_CNT_RECORDS_WRITTEN].
 *  unsettled_lost  how many of the records in lost[] lie at or above
 *                  acked_index (a restarted consumer finds them lost again
 *                  and must not count them twice).
 *
 * The consumer writes the fields with relaxed stores and magic last with a
 * release store; it validates everything it reads back (the producer could
 * scribble over the page), and a value that does not fit the indices is
 * ignored.
 * ------------------------------------------------------------------------- */
#define XPU_RING_CONSUMER_OFFSET 1536u
#define XPU_RING_CONSUMER_MAGIC 0x314e4f43u /* "CON1" */

enum xpu_consumer_loss {
  XPU_LOSS_CORRUPT = 0,   /* committed but failed validation */
  XPU_LOSS_LAPPED = 1,    /* overwritten before it was read */
  XPU_LOSS_ABANDONED = 2, /* reserved, never committed (crashed producer) */
  XPU_LOSS_RESYNC = 3,    /* unread when corrupted indices forced a resync */
  XPU_LOSS_RESTART = 4,   /* read by a daemon that died before the engine had
                             them, overwritten before the next one read them */
  XPU_LOSS_BUFFER = 5,    /* shed from the daemon's buffer (engine away) */
  XPU_LOSS_REJECTED = 6,  /* refused by the engine (caps, ownership) */
  XPU_LOSS_TRUNCATED = 7, /* written after the ring file lost its pages (truncated) */
  XPU_LOSS_MAX = 8
};

typedef struct xpu_ring_consumer_v1 {
  uint32_t magic;   /* XPU_RING_CONSUMER_MAGIC; release-stored last */
  uint32_t resyncs; /* resynchronizations after corrupted indices */
  uint64_t acked_index;
  uint64_t position_bias;
  uint64_t unsettled_lost;
  uint64_t lost[XPU_LOSS_MAX]; /* xpu_consumer_loss */
  uint8_t reserved[32];
} xpu_ring_consumer_v1;

/* ---------------------------------------------------------------------------
 * Profiling-window control (ABI 1, minor "profile 1"), in the header page:
 *
 *   XPU_RING_PROFILE_OFFSET (3200)   xpu_ring_profile_ctl_v1 (128 bytes)
 *
 * Lets the node daemon ask the hook for a short CUPTI activity window
 * (docs/profiling-window.md): every GPU kernel the process runs during the
 * window becomes an XPU_REC_PROFILE_WINDOW record in this ring, then CUPTI
 * is released (activity disabled and flushed, cuptiFinalize) so that the
 * process runs afterwards exactly as before the window.
 *
 * Two halves, one owner each. The request half is the only part of the file
 * the daemon writes besides read_index.
 *
 *   request (daemon)  req_duration_ms, req_max_records, req_ns, then req_id
 *                     with a release store. req_id is a non-zero counter the
 *                     daemon increments per request (after a restart it reads
 *                     its last value back from here). A new request is
 *                     written only once the previous one has its final status
 *                     or the daemon gave up on it (deadline).
 *   reply (hook)      hook_magic once at start-up (0: a hook without windows,
 *                     which never answers); per request the window fields,
 *                     then `ack` = ((uint64_t)req_id << 32) | status with a
 *                     release store. A reader acquire-loads `ack` first; the
 *                     fields written before it are then visible.
 *
 * The hook's completion thread polls req_id (~20 Hz) while no window runs:
 * it acquire-loads req_id, copies the request, loads req_id again and takes
 * the copy when both loads agree and req_id differs from the id of its last
 * ack. It acks STARTED (window_start_ns set) and later exactly one final
 * status (>= XPU_PROFILE_DONE), or a final status at once. Requests that
 * arrive while a window runs are answered after it ends. The daemon
 * validates every reply field (the hook is another process) and waits for
 * a final status only until its own deadline.
 * ------------------------------------------------------------------------- */
#define XPU_RING_PROFILE_OFFSET 3200u
#define XPU_RING_PROFILE_MAGIC 0x31465250u /* "PRF1" */
#define XPU_PROFILE_MAX_DURATION_MS 120000u

enum xpu_profile_status {
  XPU_PROFILE_NONE = 0,
  XPU_PROFILE_STARTED = 1,              /* CUPTI activity enabled, window running */
  XPU_PROFILE_DONE = 2,                 /* window over, records written, CUPTI released */
  XPU_PROFILE_SKIPPED_OTHER_CLIENT = 3, /* another CUPTI client (torch.profiler /
                                           Kineto, Nsight, a debugger) holds CUPTI */
  XPU_PROFILE_SKIPPED_UNAVAILABLE = 4,  /* no libcupti, a symbol missing, CUDA not
                                           initialised in the process */
  XPU_PROFILE_FAILED = 5,               /* a CUPTI call failed; `detail` = its result */
  XPU_PROFILE_REJECTED = 6              /* request out of range (duration 0 or too long) */
};

enum xpu_profile_flags {
  XPU_PROFILE_FINALIZED = 1u << 0,         /* cuptiFinalize succeeded after the window */
  XPU_PROFILE_FINALIZE_CALLBACK = 1u << 1, /* ... called from a CUDA API exit callback */
  XPU_PROFILE_TRUNCATED = 1u << 2          /* req_max_records reached: later kernels dropped */
};

typedef struct xpu_ring_profile_ctl_v1 {
  /* --- request: daemon-owned. */
  uint32_t req_id;          /* 0 = never requested; release-stored last */
  uint32_t req_duration_ms; /* 1 .. XPU_PROFILE_MAX_DURATION_MS */
  uint32_t req_max_records; /* records the hook may write; 0 = the hook's default */
  uint32_t req_reserved;
  uint64_t req_ns;     /* daemon CLOCK_REALTIME at the request (logs only) */
  uint8_t req_pad[40]; /* the reply starts on its own cache line */
  /* --- reply: hook-owned. */
  uint32_t hook_magic;      /* XPU_RING_PROFILE_MAGIC: the hook runs windows */
  uint32_t windows_total;   /* windows started since the process began */
  uint64_t ack;             /* (req_id << 32) | xpu_profile_status; release-stored last */
  uint64_t window_start_ns; /* host clock: CUPTI activity enabled */
  uint64_t window_end_ns;   /* host clock: activity disabled (0 while running) */
  uint32_t records;         /* XPU_REC_PROFILE_WINDOW records written */
  uint32_t dropped;         /* kernel executions lost: cap, CUPTI buffers, ring full */
  int32_t detail;           /* CUptiResult of a skip or failure, else 0 */
  uint32_t flags;           /* xpu_profile_flags */
  uint8_t reply_pad[16];
} xpu_ring_profile_ctl_v1;

#ifdef __cplusplus
} /* extern "C" */
static_assert(sizeof(xpu_ring_profile_ctl_v1) == 128, "profile control block is 128 bytes");
static_assert(XPU_RING_PROFILE_OFFSET >=
                  XPU_RING_PROGRESS_OFFSET + 64 + 64 * XPU_RING_PROGRESS_COMMS,
              "profile control after the progress table");
static_assert(XPU_RING_PROFILE_OFFSET % 64 == 0, "profile control is cache-line aligned");
static_assert(XPU_RING_PROFILE_OFFSET + sizeof(xpu_ring_profile_ctl_v1) <= XPU_RING_HEADER_SIZE,
              "profile control fits the header page");
static_assert(sizeof(xpu_ring_header_v1) <= XPU_RING_HEADER_SIZE, "header fits its page");
static_assert(sizeof(xpu_ring_consumer_v1) == 128, "consumer block is 128 bytes");
static_assert(sizeof(xpu_ring_header_v1) <= XPU_RING_CONSUMER_OFFSET,
              "consumer block after the header");
static_assert(XPU_RING_CONSUMER_OFFSET + sizeof(xpu_ring_consumer_v1) <= XPU_RING_PROGRESS_OFFSET,
              "consumer block before the progress table");
static_assert(sizeof(xpu_comm_progress_v1) == 64, "comm progress entry is 64 bytes");
static_assert(sizeof(xpu_ring_progress_v1) == 64 + 64 * XPU_RING_PROGRESS_COMMS,
              "progress table size");
static_assert(sizeof(xpu_ring_header_v1) <= XPU_RING_PROGRESS_OFFSET,
              "progress table after the header");
static_assert(XPU_RING_PROGRESS_OFFSET + sizeof(xpu_ring_progress_v1) <= XPU_RING_HEADER_SIZE,
              "progress table fits the header page");
#else
_Static_assert(sizeof(xpu_ring_header_v1) <= XPU_RING_HEADER_SIZE, "header fits its page");
#endif

#endif /* XPU_RING_H_ */
