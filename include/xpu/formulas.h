/*
 * xpu/formulas.h — FLOP and byte counts per signature, shared by the hook,
 * the daemon and the engine so that every component computes the same figure.
 *
 * GEMM:        flops = 2 * m * n * k * batch.
 * Collectives: "size" in bytes follows nccl-tests: AllReduce, Broadcast,
 *              Reduce, Send, Recv: count * sizeof(dtype); AllGather: count is
 *              the per-rank send count, size = count * nranks * sizeof(dtype);
 *              ReduceScatter: count is the per-rank receive count, size = count
 *              * nranks * sizeof(dtype); AlltoAll: count per peer, size = count
 *              * nranks * sizeof(dtype); Gather/Scatter as AllGather.
 *              algbw = size / time; busbw = algbw * factor with factor
 *              AllReduce 2(n-1)/n; AllGather, ReduceScatter, AlltoAll,
 *              Gather, Scatter (n-1)/n; Broadcast, Reduce, Send, Recv 1.
 */
#ifndef XPU_FORMULAS_H_
#define XPU_FORMULAS_H_

#include <stdint.h>

#include "xpu/record.h"

#ifdef __cplusplus
extern "C" {
#endif

static inline double xpu_sig_flops(const xpu_signature_v1* s) {
  if (s->kind != XPU_OP_GEMM) return 0.0;
  double b = s->batch ? (double)s->batch : 1.0;
  return 2.0 * (double)s->m * (double)s->n * (double)s->k * b;
}

/* nccl-tests "size" of a collective in bytes (0 for non-collectives). */
static inline uint64_t xpu_sig_bytes(const xpu_signature_v1* s) {
  uint64_t el = xpu_dtype_size(s->dtype);
  uint64_t n = s->comm_nranks > 0 ? (uint64_t)s->comm_nranks : 1;
  switch (s->kind) {
    case XPU_OP_ALLREDUCE:
    case XPU_OP_BROADCAST:
    case XPU_OP_REDUCE:
    case XPU_OP_SEND:
    case XPU_OP_RECV:
      return s->count * el;
    case XPU_OP_ALLGATHER:
    case XPU_OP_REDUCESCATTER:
    case XPU_OP_ALLTOALL:
    case XPU_OP_GATHER:
    case XPU_OP_SCATTER:
      return s->count * n * el;
    default:
      return 0;
  }
}

/* busbw / algbw factor. */
static inline double xpu_busbw_factor(uint32_t kind, int32_t nranks) {
  double n = nranks > 0 ? (double)nranks : 1.0;
  switch (kind) {
    case XPU_OP_ALLREDUCE:
      return 2.0 * (n - 1.0) / n;
    case XPU_OP_ALLGATHER:
    case XPU_OP_REDUCESCATTER:
    case XPU_OP_ALLTOALL:
    case XPU_OP_GATHER:
    case XPU_OP_SCATTER:
      return (n - 1.0) / n;
    case XPU_OP_BROADCAST:
    case XPU_OP_REDUCE:
    case XPU_OP_SEND:
    case XPU_OP_RECV:
      return 1.0;
    default:
      return 0.0;
  }
}

/* Duration of a record in ns, honouring XPU_REC_DUR_US. */
static inline uint64_t xpu_record_duration_ns(const xpu_record_v1* r) {
  return (r->flags & XPU_REC_DUR_US) ? (uint64_t)r->duration * 1000u : (uint64_t)r->duration;
}

#ifdef __cplusplus
}
#endif

#endif /* XPU_FORMULAS_H_ */
