/*
 * xpu/hook_api.h — the small C API that libxpu_hook.so exports besides the
 * interposed CUDA/cuBLAS/NCCL symbols. Used by the Python package, the NCCL
 * profiler plugin and custom C++ operators. Every function is safe to call
 * when tracing is disabled (it then does nothing and returns 0 / -1), never
 * blocks, never allocates on the hot path, and never throws.
 * Resolve these with dlsym(RTLD_DEFAULT, ...) so that a process without the
 * hook keeps working.
 */
#ifndef XPU_HOOK_API_H_
#define XPU_HOOK_API_H_

#include <stdint.h>

#include "xpu/record.h"

#ifdef __cplusplus
extern "C" {
#endif

#define XPU_HOOK_API_VERSION 1

/* Version of this API implemented by the loaded hook. */
int xpu_hook_api_version(void);

/* Python call sites without the GIL: call with the GIL held (ctypes.PyDLL),
 * from Python code. Compares the hook's GIL-free walk of the calling thread's
 * frames with the C API's on the current stack and, when they agree, uses it
 * for every sampled launch from then on (hook/process/py_callsite.h).
 * Returns 1 when on, 0 when not (unknown interpreter version, disagreement,
 * call sites off). The xputimer package calls it at import. */
int xpu_py_frames_selftest(void);

/* 1 when the hook is loaded and tracing in this process, else 0. */
int xpu_is_enabled(void);
/* Turn tracing on (1) or off (0) at run time; returns the previous state. */
int xpu_set_enabled(int enabled);

/* Host clock (CLOCK_REALTIME ns) as used in records. */
uint64_t xpu_now_ns(void);

/* Intern a host-side signature (kind in XPU_OP_PY_* / XPU_OP_STEP /
 * XPU_OP_ANNOTATION) named `name` (len bytes, not NUL-terminated required).
 * `aux` distinguishes variants with the same name (e.g. the GC generation is
 * stored in the signature's `peer` field). Returns sig_id > 0, or 0 on failure. */
uint32_t xpu_intern_host_signature(uint32_t kind, const char* name, uint32_t len, int32_t aux);

/* Intern a full signature; the hook fills `commit` and stores the name.
 * Returns sig_id > 0, or 0. */
uint32_t xpu_intern_signature(const xpu_signature_v1* sig, const char* name, uint32_t len);

/* Append one host event record: start_ns/end_ns in xpu_now_ns() clock,
 * `value` goes to record.seq, `flags` are OR-ed with XPU_REC_HOST.
 * Returns 0 on success, -1 if dropped (counted in the ring header). */
int xpu_emit_host_event(uint32_t sig_id, uint64_t start_ns, uint64_t end_ns, uint32_t value,
                        uint32_t flags);

/* Append a fully formed record (used by the NCCL profiler plugin). `commit`
 * is ignored and set by the ring. Returns 0 or -1 (dropped). */
int xpu_emit_record(const xpu_record_v1* rec);

/* Mark a training step [start_ns, end_ns] with id `step`. Returns 0 or -1. */
int xpu_mark_step(uint64_t step, uint64_t start_ns, uint64_t end_ns);

/* Per-communicator sequence number the hook assigned to the most recent
 * collective issued on `comm` (an ncclComm_t), or 0 if unknown. Lets the NCCL
 * profiler plugin join its events to the interposed API records. */
uint32_t xpu_comm_last_seq(const void* comm);
/* Communicator identity (xpu_signature_v1.comm_id) for `comm`, 0 if unknown. */
uint64_t xpu_comm_id(const void* comm);

#ifdef __cplusplus
}
#endif

#endif /* XPU_HOOK_API_H_ */
