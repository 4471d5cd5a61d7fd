// hook/ring/ring_fault_guard.h — keeps a truncated ring file from killing the
// training process.
//
// A ring file (XPU_RING_DIR) cannot be sealed: its owner, or root, can
// truncate it while the hook has it mapped, and the next store into a page
// past the new end of file raises SIGBUS. GuardRingMapping() registers the
// mapping; a SIGBUS handler (installed on the first registration, so only in
// a process that has a ring file) answers a fault inside a registered
// mapping by mapping anonymous memory over every page past the file's
// current end (mmap MAP_FIXED | MAP_ANONYMOUS) and returning: the faulting
// store is retried and lands in memory that nobody else sees. Those records
// are lost, and counted: while the header page is still in the file the
// hook's write_index and counters go on in it, and the daemon counts every
// record it can no longer read as `ring_truncated`
// (common/ring/ring_reader.h); the handler also bumps
// XPU_CNT_RING_TRUNCATED. A truncation that takes the header page away takes
// the counters with it: the daemon counts what it had seen written and not
// read; what the hook writes afterwards is lost uncounted.
//
// A SIGBUS anywhere else goes to the handler that was installed before ours
// (called with the same arguments when it is a function), or gets the
// previous disposition back and re-faults (SIG_DFL: the process dies as it
// would have without the hook). A handler installed after ours sees our
// faults first: one that chains by giving the signal back and raising it
// again (Python's faulthandler, after printing its report) reaches ours
// without a fault address, and ours then answers every truncated ring
// before the store is re-executed. One that does not chain loses the guard,
// and so does a thread that blocks SIGBUS (the kernel kills the process for
// a blocked synchronous fault): the hook's own thread leaves it unblocked.
//
// Thread-safety: GuardRingMapping() and UnguardRingMapping() may race with
// the handler; the handler itself is async-signal-safe (no allocation, no
// lock but a spin flag between handlers on different threads, syscalls
// fstat, mmap and sigaction only).
#ifndef XPU_HOOK_RING_RING_FAULT_GUARD_H_
#define XPU_HOOK_RING_RING_FAULT_GUARD_H_

#include <cstddef>
#include <cstdint>

namespace xpu::hook {

// Registers the shared mapping [base, base + size) of the ring file open as
// `fd` (which must stay open while registered); `base` is the ring's
// header (xpu_ring_header_v1). Installs the SIGBUS handler on first use. Returns
// false when every slot is taken (a handful: one ring per process) or the
// handler could not be installed.
bool GuardRingMapping(void* base, size_t size, int fd);

// Removes the registration (before the mapping is unmapped).
void UnguardRingMapping(void* base);

// Faults answered so far, over every mapping (for tests and diagnostics).
uint64_t RingFaultsAnswered();

}  // namespace xpu::hook

#endif  // XPU_HOOK_RING_RING_FAULT_GUARD_H_
