// shm_guard.h — reads and writes of shared memory that survive SIGBUS.
//
// A producer can shrink its ring file after the daemon mapped it (a memfd
// created without MFD_ALLOW_SEALING, or a ring file on disk); touching the
// lost pages then raises SIGBUS. Every access the ring reader makes to a
// mapping goes through these helpers: a fault inside one of them returns
// false instead of killing the daemon. A SIGBUS anywhere else keeps its
// default action.
//
// Mechanism: a process-wide SIGBUS handler (SA_NODEFER, installed once) jumps
// back to the sigsetjmp of the helper running on the faulting thread. No C++
// object lives across the jump: the helpers only move plain bytes.
//
// Thread-safety: all functions are thread-safe.
#ifndef XPU_COMMON_RING_SHM_GUARD_H_
#define XPU_COMMON_RING_SHM_GUARD_H_

#include <cstddef>
#include <cstdint>

namespace xpu::ring {

// Installs the SIGBUS handler (idempotent).
void InstallShmFaultHandler();

// Each returns false when the access faulted.
bool ShmCopy(void* dst, const void* src, size_t n);
bool ShmLoadAcquire32(const uint32_t* p, uint32_t* out);
bool ShmLoadRelaxed32(const uint32_t* p, uint32_t* out);
bool ShmLoadAcquire64(const uint64_t* p, uint64_t* out);
bool ShmLoadRelaxed64(const uint64_t* p, uint64_t* out);
bool ShmStoreRelease64(uint64_t* p, uint64_t v);
bool ShmStoreRelaxed64(uint64_t* p, uint64_t v);
bool ShmStoreRelease32(uint32_t* p, uint32_t v);
bool ShmStoreRelaxed32(uint32_t* p, uint32_t v);

}  // namespace xpu::ring

#endif  // XPU_COMMON_RING_SHM_GUARD_H_
