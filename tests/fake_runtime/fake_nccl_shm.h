/*
 * tests/fake_runtime/fake_nccl_shm.h — layout of the shared-memory segment
 * through which the ranks of one fake NCCL communicator rendezvous. Tests
 * map it read-only to observe progress (hang diagnosis: which rank stopped
 * arriving).
 *
 * Name: "/xpu_fake_nccl_" + lower-case hex of the first 16 bytes of the
 * ncclUniqueId (32 hex digits); the file is /dev/shm/xpu_fake_nccl_<hex>.
 * The id itself is 128 random bytes; xpu-fake-train writes it to its
 * --nccl-id-file as 256 hex digits, so the segment name is the file's first
 * 32 characters.
 *
 * Every member maps the whole segment; each rank writes only its own slot
 * (single writer per field); everybody reads all slots. Counters are 64-bit,
 * naturally aligned, accessed with __atomic builtins: a writer stores the
 * timestamps first and then the counter with a release store; a reader
 * acquire-loads the counter before reading the timestamps.
 *
 *   header (4 KiB) | slot[0] | slot[1] | ... | slot[XPU_FAKE_NCCL_MAX_RANKS-1]
 *
 * Collective protocol for the collective with per-communicator sequence s
 * (1-based, counted in execution order on each rank):
 *   1. the rank's stream worker reaches the op: writes
 *      coll_arrival_ns[s % RING] then coll_arrived = s;
 *   2. it waits until every member's coll_arrived >= s;
 *   3. start = max over members of coll_arrival_ns[s % RING] (a ring starts
 *      when its last member arrives), end = start + modelled duration; the
 *      worker sleeps until end — every member ends at the same time;
 *   4. coll_completed = s.
 * A rank never runs more than one collective ahead of the slowest member, so
 * a ring of RING arrival stamps cannot be overwritten before it is read.
 * Send/Recv use the per-peer counters the same way, paired by the per-pair
 * sequence (the n-th send from a to b matches the n-th recv of b from a).
 *
 * Stalled kernel (tests of communication hangs): with
 * XPU_FAKE_NCCL_STALL_SEQ=s and XPU_FAKE_NCCL_STALL_LINK=r, collective s
 * never completes on any member: every rank arrives, then models a ring whose
 * link r -> r+1 (mod nranks) carries nothing: rank r+1+k stops after k ring
 * steps (coll_step = k), so progress drops to 0 right behind the broken link.
 */
#ifndef XPU_TESTS_FAKE_RUNTIME_FAKE_NCCL_SHM_H_
#define XPU_TESTS_FAKE_RUNTIME_FAKE_NCCL_SHM_H_

#include <stdint.h>

#define XPU_FAKE_NCCL_MAGIC 0x4e43434cu /* "NCCL" */
#define XPU_FAKE_NCCL_VERSION 1u
#define XPU_FAKE_NCCL_MAX_RANKS 64
#define XPU_FAKE_NCCL_RING 16
#define XPU_FAKE_NCCL_P2P_RING 4
#define XPU_FAKE_NCCL_SHM_PREFIX "/xpu_fake_nccl_"

typedef struct xpu_fake_nccl_header {
  uint32_t magic; /* set (CAS from 0) by the first rank to attach */
  uint32_t version;
  int32_t nranks;   /* written before magic */
  int32_t attached; /* ranks that mapped and have not destroyed yet */
  uint8_t reserved[4096 - 16];
} xpu_fake_nccl_header;

typedef struct xpu_fake_nccl_slot {
  /* identity, written once at init before init_done */
  int32_t pid;
  int32_t global_rank; /* RANK of the process, or the comm rank if unset */
  int32_t device;
  int32_t reserved0;
  uint64_t init_done; /* 1 once the identity is written */

  /* collectives */
  uint64_t coll_arrived;   /* seq of the last collective this rank reached */
  uint64_t coll_completed; /* seq of the last collective completed here */
  uint64_t coll_arrival_ns[XPU_FAKE_NCCL_RING];

  /* ncclCommSplit rendezvous (generation g = this rank's g-th split) */
  uint64_t split_posted; /* = g once split_color/key hold this split's */
  uint64_t split_read;   /* = g once this rank read every member's */
  int32_t split_color;
  int32_t split_key;

  /* point-to-point, indexed by peer */
  uint64_t send_arrived[XPU_FAKE_NCCL_MAX_RANKS];
  uint64_t recv_arrived[XPU_FAKE_NCCL_MAX_RANKS];
  uint64_t send_ns[XPU_FAKE_NCCL_MAX_RANKS][XPU_FAKE_NCCL_P2P_RING];
  uint64_t recv_ns[XPU_FAKE_NCCL_MAX_RANKS][XPU_FAKE_NCCL_P2P_RING];

  /* intra-kernel progress of the collective coll_arrived: ring steps this
   * rank finished (0 at arrival, 2*(nranks-1) at completion). The source the
   * hang diagnosis reads where real GPUs would be read with cuda-gdb; with
   * XPU_FAKE_NCCL_STALL_SEQ it shows where a broken ring link stopped it. */
  uint64_t coll_step;
  /* shape of collective s at [s % RING]: (kind << 56) | size in bytes,
   * written before coll_arrived. Members that arrive at the same seq with
   * different shapes never complete it (as a real mismatched NCCL
   * collective would hang). */
  uint64_t coll_shape[XPU_FAKE_NCCL_RING];
} xpu_fake_nccl_slot;

typedef struct xpu_fake_nccl_segment {
  xpu_fake_nccl_header header;
  xpu_fake_nccl_slot slots[XPU_FAKE_NCCL_MAX_RANKS];
} xpu_fake_nccl_segment;

#ifdef __cplusplus
static_assert(sizeof(xpu_fake_nccl_header) == 4096, "header is one page");
static_assert(sizeof(xpu_fake_nccl_slot) % 8 == 0, "slots keep 8-byte alignment");
#endif

#endif /* XPU_TESTS_FAKE_RUNTIME_FAKE_NCCL_SHM_H_ */
