// hook/interposers/fake_core_for_test.h — a recording test double of the hook
// core (everything hook/core_api.h declares), for the interposition layers' unit
// tests. The layers are linked against it instead of the real core, so a
// test sees exactly which signatures were interned and which ops were begun,
// ended or emitted, and controls which "real" functions ResolveReal finds.
// Test-only: never linked into libxpu_hook.so.
// Thread-safety: all state is guarded by one mutex (tests may launch from
// several threads); the reentrancy guard is thread-local like the real one.
#ifndef XPU_HOOK_INTERPOSERS_FAKE_CORE_FOR_TEST_H_
#define XPU_HOOK_INTERPOSERS_FAKE_CORE_FOR_TEST_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hook/core_api.h"

namespace xpu::hook::fake {

struct InternedSig {
  xpu_signature_v1 sig;
  std::string name;
};
struct BeginCall {
  uint32_t sig_id;
  const void* stream;
  uint32_t seq;
  uint16_t flags;
};
struct EndCall {
  uint32_t slot;
  const void* stream;
  int status;
  bool want_marker;  // the layer asked for a completion marker of the op's own
};
struct SyncNote {
  const void* stream;
  bool all_streams;
};
struct CallsiteLink {
  uint32_t slot;  // OpHandle::slot of the launch
  uint32_t launch_sig;
  uint32_t seq;
  uint32_t stack_sig;  // what CapturePyCallsite returned
};
struct HostInterval {
  uint32_t sig_id;
  uint64_t start_ns, end_ns;
  uint32_t value;
  uint16_t flags;
};

// Maps a real symbol name to the fake the layers should forward to. Must be
// called before the first call of the interposer (XPU_REAL_FN caches).
void SetReal(const std::string& name, void* fn);

// Switches Active() and KernelSampleEvery().
void SetActive(bool active);
void SetKernelSampleEvery(uint32_t n);

// Whether BeginGpuOp reports the occurrence as picked by the sampler
// (default false), and what CapturePyCallsite returns (default 0).
void SetPicked(bool picked);
void SetPyCallsite(uint32_t stack_sig);
// How often CapturePyCallsite was called.
uint64_t PyCallsiteCaptures();

// Clears everything recorded so far (not the reals, not interned ids).
void Reset();

// Snapshots of what was recorded.
std::vector<BeginCall> Begins();
std::vector<EndCall> Ends();
std::vector<HostInterval> Hosts();
std::vector<CallsiteLink> Links();
std::vector<SyncNote> Syncs();
// Net NoteCapture calls (begins minus ends).
int CaptureDepth();
uint64_t Counter(xpu_counter c);
// Signature for an id returned by InternSignature (id >= 1).
InternedSig Sig(uint32_t sig_id);
// Event log in call order: "begin", "end", "host", "capture", "link", "sync" plus whatever the fakes of
// the real functions append with Log().
std::vector<std::string> Events();
void Log(const std::string& event);

}  // namespace xpu::hook::fake

#endif  // XPU_HOOK_INTERPOSERS_FAKE_CORE_FOR_TEST_H_
