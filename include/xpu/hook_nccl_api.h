/*
 * xpu/hook_nccl_api.h — the part of libxpu_hook.so's C API that exists only
 * for the NCCL profiler plugin (libnccl-profiler-xpu.so, hook/nccl_profiler/).
 * It lets the plugin (1) ask whether the hook wants collectives timed by the
 * plugin, and (2) join each collective / point-to-point event that NCCL hands
 * the plugin to the record the NCCL interposer wrote for the same call: same
 * sig_id, same per-communicator seq, same stream index.
 *
 * The join. The NCCL interposer (hook/interposers/nccl.cc) appends one entry per
 * collective / p2p call to a thread-local "issue list" right before calling
 * the real NCCL function, and clears the list when the call returns (or, inside
 * ncclGroupStart/End, when the outermost ncclGroupEnd returns). NCCL starts
 * the plugin's ncclProfileColl / ncclProfileP2p events synchronously on that
 * same thread while it enqueues (the implicit group of a single call, or the
 * user's ncclGroupEnd), so the plugin's startEvent can claim the matching
 * entry with xpu_nccl_claim_issued_op. NCCL may reorder the ops of a group, so
 * entries are matched by content (kind, bytes, root/peer, rank, size, and the
 * communicator once known), not by position.
 *
 * Both functions are safe without a runtime (they return 0), never block,
 * never allocate. Resolve them with dlsym(RTLD_DEFAULT, ...): a process
 * without the hook must keep working (the plugin then disables itself).
 */
#ifndef XPU_HOOK_NCCL_API_H_
#define XPU_HOOK_NCCL_API_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define XPU_NCCL_PLUGIN_API_VERSION 1u

/* Called from the plugin's init (once per communicator). Returns 1 when the
 * hook traces GPU ops with XPU_TIMING=sampled: from then on the interposer
 * records collectives that the plugin can time (xpu_nccl_plugin_times_kind)
 * with a completion-tracking, non-timing event only, and the plugin writes
 * their timed records. Returns 0 otherwise (no hook runtime, tracing off,
 * XPU_TIMING=all or off, API version mismatch): the plugin must then fail its
 * init so that NCCL disables it for that communicator. Once attached, the
 * hook stays in plugin mode for the life of the process. */
int xpu_nccl_plugin_attach(uint32_t plugin_api_version);

/* 1 when collectives of `kind` (xpu_op_kind) are timed by an attached plugin,
 * else 0. */
int xpu_nccl_plugin_times_kind(uint32_t kind);

/* What the plugin knows about a collective / p2p event. */
typedef struct xpu_nccl_issue_query_v1 {
  uint32_t kind;    /* xpu_op_kind (XPU_OP_ALLREDUCE .. XPU_OP_RECV) */
  int32_t peer;     /* root of rooted collectives, p2p peer; -1 = do not compare */
  uint64_t bytes;   /* count x element size (0 = do not compare) */
  int32_t rank;     /* rank in the communicator, -1 = do not compare */
  int32_t nranks;   /* communicator size, 0 = do not compare */
  uint64_t comm_id; /* xpu comm_id learned earlier for this communicator, 0 = any */
} xpu_nccl_issue_query_v1;

/* The interposer's view of the claimed call. */
typedef struct xpu_nccl_issued_op_v1 {
  uint32_t sig_id;    /* signature interned by the interposer */
  uint32_t seq;       /* record.seq the interposer assigned */
  uint64_t comm_id;   /* xpu comm_id of the communicator, 0 unknown */
  uint64_t launch_ns; /* CPU launch time (host clock): call entry, or the
                         outermost ncclGroupEnd for grouped ops; 0 unknown */
  uint16_t stream;    /* interned stream index (record.stream) */
  uint16_t reserved0;
  uint32_t reserved1;
} xpu_nccl_issued_op_v1;

/* Claims the oldest unclaimed entry of the calling thread's issue list that
 * matches `query`. Returns the number of unclaimed entries that matched
 * (0: nothing claimed, `*out` untouched; 1: unambiguous; >1: the oldest was
 * claimed). */
int xpu_nccl_claim_issued_op(const xpu_nccl_issue_query_v1* query, xpu_nccl_issued_op_v1* out);

#ifdef __cplusplus
} /* extern "C" */
static_assert(sizeof(xpu_nccl_issue_query_v1) == 32, "query ABI");
static_assert(sizeof(xpu_nccl_issued_op_v1) == 32, "issued op ABI");
#endif

#endif /* XPU_HOOK_NCCL_API_H_ */
