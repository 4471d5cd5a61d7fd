// hook/layers_fake_tracer.h — a recording test double of the hook core
// (everything hook/tracer.h declares), for the interposition layers' unit
// tests. The layers are linked against it instead of the real core, so a
// test sees exactly which signatures were interned and which ops were begun,
// ended or emitted, and controls which "real" functions ResolveReal finds.
// Test-only: never linked into libxpu_hook.so.
// Thread-safety: all state is guarded by one mutex (tests may launch from
// several threads); the reentrancy guard is thread-local like the real one.
#ifndef XPU_HOOK_LAYERS_FAKE_TRACER_H_
#define XPU_HOOK_LAYERS_FAKE_TRACER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "hook/tracer.h"

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

// Clears everything recorded so far (not the reals, not interned ids).
void Reset();

// Snapshots of what was recorded.
std::vector<BeginCall> Begins();
std::vector<EndCall> Ends();
std::vector<HostInterval> Hosts();
uint64_t Counter(xpu_counter c);
// Signature for an id returned by InternSignature (id >= 1).
InternedSig Sig(uint32_t sig_id);
// Event log in call order: "begin", "end", "host" plus whatever the fakes of
// the real functions append with Log().
std::vector<std::string> Events();
void Log(const std::string& event);

}  // namespace xpu::hook::fake

#endif  // XPU_HOOK_LAYERS_FAKE_TRACER_H_
