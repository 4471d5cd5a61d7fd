// hook/interposers/fake_core_for_test.cc — see fake_core_for_test.h.
#include "hook/interposers/fake_core_for_test.h"

#include <cstring>
#include <mutex>

namespace xpu::hook {
namespace fake {
namespace {

struct State {
  std::mutex mu;
  std::map<std::string, void*> reals;
  bool active = true;
  uint32_t kernel_sample_every = 0;
  std::vector<InternedSig> sigs;
  std::vector<BeginCall> begins;
  std::vector<EndCall> ends;
  std::vector<HostInterval> hosts;
  std::vector<CallsiteLink> links;
  std::vector<SyncNote> syncs;
  int capture_depth = 0;
  bool picked = false;
  uint32_t py_callsite = 0;
  uint64_t captures = 0;
  std::vector<std::string> events;
  uint64_t counters[XPU_CNT_MAX] = {};
  uint64_t clock = 1000;
};

State& S() {
  static State* s = new State();
  return *s;
}

thread_local int t_depth = 0;

}  // namespace

void SetReal(const std::string& name, void* fn) {
  std::lock_guard<std::mutex> l(S().mu);
  S().reals[name] = fn;
}
void SetActive(bool active) {
  std::lock_guard<std::mutex> l(S().mu);
  S().active = active;
}
void SetKernelSampleEvery(uint32_t n) {
  std::lock_guard<std::mutex> l(S().mu);
  S().kernel_sample_every = n;
}
void SetPicked(bool picked) {
  std::lock_guard<std::mutex> l(S().mu);
  S().picked = picked;
}
void SetPyCallsite(uint32_t stack_sig) {
  std::lock_guard<std::mutex> l(S().mu);
  S().py_callsite = stack_sig;
}
uint64_t PyCallsiteCaptures() {
  std::lock_guard<std::mutex> l(S().mu);
  return S().captures;
}
std::vector<CallsiteLink> Links() {
  std::lock_guard<std::mutex> l(S().mu);
  return S().links;
}
std::vector<SyncNote> Syncs() {
  std::lock_guard<std::mutex> l(S().mu);
  return S().syncs;
}
int CaptureDepth() {
  std::lock_guard<std::mutex> l(S().mu);
  return S().capture_depth;
}
void Reset() {
  std::lock_guard<std::mutex> l(S().mu);
  S().links.clear();
  S().syncs.clear();
  S().captures = 0;
  S().begins.clear();
  S().ends.clear();
  S().hosts.clear();
  S().events.clear();
  std::memset(S().counters, 0, sizeof(S().counters));
}
std::vector<BeginCall> Begins() {
  std::lock_guard<std::mutex> l(S().mu);
  return S().begins;
}
std::vector<EndCall> Ends() {
  std::lock_guard<std::mutex> l(S().mu);
  return S().ends;
}
std::vector<HostInterval> Hosts() {
  std::lock_guard<std::mutex> l(S().mu);
  return S().hosts;
}
uint64_t Counter(xpu_counter c) {
  std::lock_guard<std::mutex> l(S().mu);
  return S().counters[c];
}
InternedSig Sig(uint32_t sig_id) {
  std::lock_guard<std::mutex> l(S().mu);
  if (sig_id == 0 || sig_id > S().sigs.size()) return InternedSig{};
  return S().sigs[sig_id - 1];
}
std::vector<std::string> Events() {
  std::lock_guard<std::mutex> l(S().mu);
  return S().events;
}
void Log(const std::string& event) {
  std::lock_guard<std::mutex> l(S().mu);
  S().events.push_back(event);
}

}  // namespace fake

// ---- core_api.h -------------------------------------------------------------

void* ResolveReal(Library, const char* name) {
  std::lock_guard<std::mutex> l(fake::S().mu);
  auto it = fake::S().reals.find(name);
  if (it == fake::S().reals.end()) {
    ++fake::S().counters[XPU_CNT_SYMBOL_MISSING];
    return nullptr;
  }
  return it->second;
}

ReentrancyGuard::ReentrancyGuard() : entered_(fake::t_depth++ == 0) {}
ReentrancyGuard::~ReentrancyGuard() { --fake::t_depth; }

bool Active() {
  std::lock_guard<std::mutex> l(fake::S().mu);
  return fake::S().active;
}

uint64_t NowNs() {
  std::lock_guard<std::mutex> l(fake::S().mu);
  return fake::S().clock += 10;
}

uint32_t InternSignature(const xpu_signature_v1& sig, const char* name, size_t name_len) {
  std::lock_guard<std::mutex> l(fake::S().mu);
  const std::string n(name, name_len);
  auto& sigs = fake::S().sigs;
  for (size_t i = 0; i < sigs.size(); ++i) {
    if (sigs[i].name == n && std::memcmp(&sigs[i].sig, &sig, sizeof(sig)) == 0) {
      return static_cast<uint32_t>(i + 1);
    }
  }
  sigs.push_back(fake::InternedSig{sig, n});
  return static_cast<uint32_t>(sigs.size());
}

uint16_t StreamIndex(const void* stream) {
  return static_cast<uint16_t>(reinterpret_cast<uintptr_t>(stream) & 0xFFFF);
}

OpHandle BeginGpuOp(uint32_t sig_id, const void* stream, uint32_t seq, uint16_t extra_flags) {
  std::lock_guard<std::mutex> l(fake::S().mu);
  fake::S().begins.push_back(fake::BeginCall{sig_id, stream, seq, extra_flags});
  fake::S().events.push_back("begin");
  OpHandle h;
  h.slot = static_cast<uint32_t>(fake::S().begins.size());
  h.sig_id = sig_id;
  h.launch_ns = fake::S().clock;
  h.seq = seq;
  h.picked = fake::S().picked ? 1 : 0;
  return h;
}

void EndGpuOp(const OpHandle& op, const void* stream, int status) {
  std::lock_guard<std::mutex> l(fake::S().mu);
  fake::S().ends.push_back(fake::EndCall{op.slot, stream, status, op.want_marker != 0});
  fake::S().events.push_back("end");
}

void NoteHostSync(const void* stream, bool all_streams) {
  std::lock_guard<std::mutex> l(fake::S().mu);
  fake::S().syncs.push_back(fake::SyncNote{stream, all_streams});
  fake::S().events.push_back("sync");
}

void NoteCapture(int delta) {
  std::lock_guard<std::mutex> l(fake::S().mu);
  fake::S().capture_depth += delta;
}

void EmitHostInterval(uint32_t sig_id, uint64_t start_ns, uint64_t end_ns, uint32_t value,
                      uint16_t flags) {
  std::lock_guard<std::mutex> l(fake::S().mu);
  fake::S().hosts.push_back(fake::HostInterval{sig_id, start_ns, end_ns, value, flags});
  fake::S().events.push_back("host");
}

uint32_t CapturePyCallsite() {
  std::lock_guard<std::mutex> l(fake::S().mu);
  ++fake::S().captures;
  fake::S().events.push_back("capture");
  return fake::S().py_callsite;
}

void EmitCallsiteLink(const OpHandle& op, uint32_t stack_sig) {
  if (op.picked == 0 || stack_sig == 0 || op.sig_id == 0) return;
  std::lock_guard<std::mutex> l(fake::S().mu);
  fake::S().links.push_back(fake::CallsiteLink{op.slot, op.sig_id, op.seq, stack_sig});
  fake::S().events.push_back("link");
}

void Count(xpu_counter counter, uint64_t n) {
  std::lock_guard<std::mutex> l(fake::S().mu);
  fake::S().counters[counter] += n;
}

uint32_t KernelSampleEvery() {
  std::lock_guard<std::mutex> l(fake::S().mu);
  return fake::S().kernel_sample_every;
}

void EnsureStarted() {}

}  // namespace xpu::hook
