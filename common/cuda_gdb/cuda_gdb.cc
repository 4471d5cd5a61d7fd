// common/cuda_gdb/cuda_gdb.cc — see cuda_gdb.h.
#include "common/cuda_gdb/cuda_gdb.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>

namespace xpu::cuda_gdb {
namespace {

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

bool Field(std::string_view line, std::string_view key, uint64_t* out) {
  std::string k = " " + std::string(key) + "=";
  size_t p = line.find(k);
  if (p == std::string_view::npos) return false;
  std::string v(line.substr(p + k.size(), 24));
  char* end = nullptr;
  long long x = strtoll(v.c_str(), &end, 0);
  if (end == v.c_str()) return false;
  *out = static_cast<uint64_t>(x);
  return true;
}

// "key=a,b,c" -> numbers.
bool List(std::string_view line, std::string_view key, std::vector<uint64_t>* out) {
  out->clear();
  std::string k = " " + std::string(key) + "=";
  size_t p = line.find(k);
  if (p == std::string_view::npos) return false;
  std::string v(line.substr(p + k.size()));
  const char* c = v.c_str();
  while (*c != 0) {
    char* end = nullptr;
    unsigned long long x = strtoull(c, &end, 0);
    if (end == c) break;
    out->push_back(x);
    c = end;
    if (*c != ',') break;
    ++c;
  }
  return !out->empty();
}

}  // namespace

const char* NcclProtoName(NcclProto p) {
  switch (p) {
    case NcclProto::kSimple:
      return "SIMPLE";
    case NcclProto::kLL:
      return "LL";
    case NcclProto::kLL128:
      return "LL128";
    default:
      return "unknown";
  }
}

uint64_t ChannelProgress::Progress(NcclProto proto) const {
  switch (proto) {
    case NcclProto::kLL: {
      if (!has_ll) return 0;
      // Flags are 32-bit (NCCL_LL_FLAG): compare modulo 2^32.
      int64_t best = 0;
      for (uint32_t f : ll_flags) {
        best = std::max<int64_t>(best, static_cast<int32_t>(f - static_cast<uint32_t>(recv_step)));
      }
      return static_cast<uint64_t>(best);
    }
    case NcclProto::kLL128: {
      if (!has_ll128) return 0;
      int64_t best = 0;
      for (uint64_t f : ll128_flags)
        best = std::max<int64_t>(best, static_cast<int64_t>(f - recv_step));
      return static_cast<uint64_t>(best);
    }
    default:
      return has_tail && recv_tail > recv_step ? recv_tail - recv_step : 0;
  }
}

uint64_t ChannelProgress::Delivered(NcclProto* proto_out) const {
  NcclProto best = NcclProto::kUnknown;
  uint64_t most = 0;
  for (NcclProto p : {NcclProto::kSimple, NcclProto::kLL, NcclProto::kLL128}) {
    const uint64_t d = Progress(p);
    if (d > most) {
      most = d;
      best = p;
    }
  }
  if (proto_out != nullptr) *proto_out = best;
  return most;
}

std::string KernelListScript() {
  return "set pagination off\n"
         "set confirm off\n"
         "set cuda break_on_launch none\n"
         "info cuda kernels\n"
         "detach\n"
         "quit\n";
}

std::vector<CudaKernel> ParseCudaKernels(std::string_view text) {
  // "*      0      -   0    1 Active 0x00000001 (2,1,1) (640,1,1) ncclDevKernel_..."
  std::vector<CudaKernel> out;
  for (std::string_view line : Lines(text)) {
    size_t name_at = line.find("ncclDevKernel");
    if (name_at == std::string_view::npos) name_at = line.find("ncclKernel");
    if (name_at == std::string_view::npos) continue;
    std::string head(line.substr(0, name_at));
    for (char& c : head) {
      if (c == '*') c = ' ';
    }
    CudaKernel k;
    int parent_dummy = 0, grid = 0;
    char parent[16] = {0};
    if (sscanf(head.c_str(), "%d %15s %d %d", &k.id, parent, &k.device, &grid) < 3) continue;
    (void)parent_dummy;
    size_t paren = head.find('(');
    if (paren != std::string::npos) k.grid_x = atoi(head.c_str() + paren + 1);
    std::string_view name = line.substr(name_at);
    k.name = std::string(name.substr(0, name.find('(')));
    if (k.name.find("LL128") != std::string::npos) {
      k.proto = NcclProto::kLL128;
    } else if (k.name.find("_LL") != std::string::npos) {
      k.proto = NcclProto::kLL;
    } else if (k.name.find("SIMPLE") != std::string::npos) {
      k.proto = NcclProto::kSimple;
    }
    out.push_back(std::move(k));
  }
  return out;
}

int ParseSmVersion(std::string_view text) {
  size_t at = text.find("XPU-CUDA-DEVICES");
  if (at == std::string_view::npos) return 0;
  std::string_view rest = text.substr(at);
  const size_t stop = rest.find("XPU-NCCL");
  if (stop != std::string_view::npos) rest = rest.substr(0, stop);
  for (size_t p = rest.find("sm_"); p != std::string_view::npos; p = rest.find("sm_", p + 3)) {
    int v = 0;
    size_t q = p + 3;
    while (q < rest.size() && rest[q] >= '0' && rest[q] <= '9') v = v * 10 + (rest[q++] - '0');
    if (v > 0) return v;
  }
  return 0;
}

int SharedBaseForSm(int sm) {
  if (sm <= 0) return -1;
  return sm >= 90 ? 0x400 : 0;
}

// Field offsets in NCCL 2.28's device structures (src/device/common.h
// ncclShmemData, src/include/device.h ncclDevChannel / ncclDevChannelPeer /
// ncclConnInfo / ncclRing; x86-64 and device layouts agree), measured with
// offsetof on the v2.28.9 sources. The NCCL in the PyTorch wheels carries no
// debug info for ncclShmem ("has unknown type"), so the script reads raw
// memory at these offsets instead of naming fields.
struct NcclLayout {
  int channel_id = 32;      // ncclShmem.channelId (int)
  int peers = 144;          // ncclShmem.channel.peers (ncclDevChannelPeer**)
  int ring_prev = 152;      // ncclShmem.channel.ring.prev (int); .next at +4
  int ring_index = 168;     // ncclShmem.channel.ring.index (int)
  int peer_send0 = 0;       // ncclDevChannelPeer.send[0] (ncclConnInfo)
  int peer_recv0 = 304;     // ncclDevChannelPeer.recv[0]: after send[NCCL_MAX_CONNS = 2] of 152 B
  int conn_buff_ll = 0;     // ncclConnInfo.buffs[NCCL_PROTO_LL] (char*)
  int conn_buff_ll128 = 8;  // ncclConnInfo.buffs[NCCL_PROTO_LL128]
  int conn_tail = 48;       // ncclConnInfo.tail (uint64_t*)
  int conn_head = 56;       // ncclConnInfo.head (uint64_t*)
  int conn_step = 104;      // ncclConnInfo.step (uint64_t)
  // Slot strides of the default buffer sizes (init.cc DEFAULT_LL_BUFFSIZE /
  // DEFAULT_LL128_BUFFSIZE over NCCL_STEPS): 8 lines x 512 threads x 16 B,
  // and 120 elements x 640 threads x 8 B. NCCL_LL_BUFFSIZE /
  // NCCL_LL128_BUFFSIZE change them (the flags then read wrong slots).
  int ll_slot = 65536;
  int ll128_slot = 614400;
  int ll_flag1 = 4;         // union ncclLLFifoLine: data1, flag1, data2, flag2 (uint32)
  int ll128_flag = 15 * 8;  // NCCL_LL128_LINEELEMS = 16 uint64_t per line, the flag is the last
};

namespace {

// Shared-window offsets ncclShmem may sit at: sm_90 and later, then older.
constexpr int kSharedBases[] = {0x400, 0};

std::string At(const char* type, const std::string& base, int off) {
  return "*(" + std::string(type) + "*)(" + base + "+" + std::to_string(off) + ")";
}

// Commands that print one channel's counters, once per shared-window base;
// the flags of both LL protocols are read whatever the kernel's protocol
// (cheap, and the blind reads do not know it yet).
void AppendChannel(int kernel, int block, std::string* s) {
  const NcclLayout L;
  const std::string id = "kernel=" + std::to_string(kernel) + " channel=" + std::to_string(block);
  *s += "cuda kernel " + std::to_string(kernel) + " block (" + std::to_string(block) +
        ",0,0) thread (0,0,0)\n";
  const std::string u64 = "unsigned long long";
  for (int base : kSharedBases) {
    const std::string tag = id + " base=" + std::to_string(base);
    *s += "echo XPU-NCCL-BEGIN " + tag + "\\n\n";
    *s += "set $xs = (@shared char*)" + std::to_string(base) + "\n";
    *s += "printf \"XPU-NCCL " + id +
          " channel_id=%d ring_prev=%d ring_next=%d ring_index=%d\\n\", " +
          At("@shared int", "$xs", L.channel_id) + ", " + At("@shared int", "$xs", L.ring_prev) +
          ", " + At("@shared int", "$xs", L.ring_prev + 4) + ", " +
          At("@shared int", "$xs", L.ring_index) + "\n";
    // peers[prev]->recv[0] and peers[next]->send[0] (generic addresses).
    *s += "set $xp = " + At(("@shared " + u64).c_str(), "$xs", L.peers) + "\n";
    *s += "set $xr = *(" + u64 + "*)($xp+8*(" + At("@shared int", "$xs", L.ring_prev) + "))+" +
          std::to_string(L.peer_recv0) + "\n";
    *s += "set $xn = *(" + u64 + "*)($xp+8*(" + At("@shared int", "$xs", L.ring_prev + 4) + "))+" +
          std::to_string(L.peer_send0) + "\n";
    *s += "printf \"XPU-NCCL " + id + " recv_step=%llu recv_tail=%llu\\n\", " +
          At(u64.c_str(), "$xr", L.conn_step) + ", *" +
          At((u64 + "*").c_str(), "$xr", L.conn_tail) + "\n";
    *s += "printf \"XPU-NCCL " + id + " send_step=%llu send_head=%llu\\n\", " +
          At(u64.c_str(), "$xn", L.conn_step) + ", *" +
          At((u64 + "*").c_str(), "$xn", L.conn_head) + "\n";
    std::string fmt, args;
    *s += "set $xl = " + At(u64.c_str(), "$xr", L.conn_buff_ll) + "\n";
    for (int k = 0; k < kNcclSteps; ++k) {
      fmt += k ? ",%u" : "%u";
      args += ", " + At("unsigned int", "$xl", k * L.ll_slot + L.ll_flag1);
    }
    *s += "printf \"XPU-NCCL " + id + " ll_flags=" + fmt + "\\n\"" + args + "\n";
    fmt.clear();
    args.clear();
    *s += "set $xm = " + At(u64.c_str(), "$xr", L.conn_buff_ll128) + "\n";
    for (int k = 0; k < kNcclSteps; ++k) {
      fmt += k ? ",%llu" : "%llu";
      args += ", " + At(u64.c_str(), "$xm", k * L.ll128_slot + L.ll128_flag);
    }
    *s += "printf \"XPU-NCCL " + id + " ll128_flags=" + fmt + "\\n\"" + args + "\n";
    *s += "echo XPU-NCCL-END " + tag + "\\n\n";
  }
}

}  // namespace

std::string ProgressScript(const std::vector<CudaKernel>& kernels, int max_channels) {
  std::string s = "set pagination off\nset confirm off\nset cuda break_on_launch none\n";
  for (const CudaKernel& k : kernels) {
    const int blocks = k.grid_x > 0 ? std::min(k.grid_x, max_channels) : 1;
    for (int c = 0; c < blocks; ++c) AppendChannel(k.id, c, &s);
  }
  s += "detach\nquit\n";
  return s;
}

std::string BlindProgressCommands(int max_kernels, int max_channels) {
  std::string s =
      "set cuda break_on_launch none\necho XPU-CUDA-KERNELS\\n\ninfo cuda kernels\n"
      "echo XPU-CUDA-DEVICES\\n\ninfo cuda devices\n";
  for (int k = 0; k < max_kernels; ++k) {
    for (int c = 0; c < max_channels; ++c) AppendChannel(k, c, &s);
  }
  return s;
}

std::vector<ChannelProgress> ParseProgress(std::string_view output) {
  std::vector<ChannelProgress> out;
  ChannelProgress* cur = nullptr;
  for (std::string_view line : Lines(output)) {
    if (line.rfind("XPU-NCCL-BEGIN ", 0) == 0) {
      out.emplace_back();
      cur = &out.back();
      uint64_t v = 0;
      std::string l = " " + std::string(line.substr(15));
      if (Field(l, "kernel", &v)) cur->kernel = static_cast<int>(v);
      if (Field(l, "channel", &v)) cur->block = static_cast<int>(v);
      if (Field(l, "base", &v)) cur->base = static_cast<int>(v);
      continue;
    }
    if (cur == nullptr) continue;
    if (line.rfind("XPU-NCCL-END ", 0) == 0) {
      // Readable when the ring neighbours came out; errors of single
      // expressions stay as notes.
      cur->ok = cur->ring_prev >= 0 && cur->ring_next >= 0;
      cur = nullptr;
      continue;
    }
    if (line.rfind("XPU-NCCL ", 0) == 0) {
      std::string l = " " + std::string(line.substr(9));
      uint64_t v = 0;
      if (Field(l, "channel_id", &v)) cur->channel_id = static_cast<int>(v);
      if (Field(l, "ring_prev", &v)) cur->ring_prev = static_cast<int>(v);
      if (Field(l, "ring_next", &v)) cur->ring_next = static_cast<int>(v);
      if (Field(l, "ring_index", &v)) cur->ring_index = static_cast<int>(v);
      if (Field(l, "recv_step", &v)) cur->recv_step = v;
      if (Field(l, "recv_tail", &v)) {
        cur->recv_tail = v;
        cur->has_tail = true;
      }
      if (Field(l, "send_step", &v)) cur->send_step = v;
      if (Field(l, "send_head", &v)) cur->send_head = v;
      std::vector<uint64_t> list;
      if (List(l, "ll_flags", &list) && list.size() == kNcclSteps) {
        for (int k = 0; k < kNcclSteps; ++k) cur->ll_flags[k] = static_cast<uint32_t>(list[k]);
        cur->has_ll = true;
      }
      if (List(l, "ll128_flags", &list) && list.size() == kNcclSteps) {
        for (int k = 0; k < kNcclSteps; ++k) cur->ll128_flags[k] = list[k];
        cur->has_ll128 = true;
      }
      continue;
    }
    // Anything else inside a block is cuda-gdb talking: errors such as
    // "Cannot access memory at address 0x..." or "Invalid coordinates".
    std::string_view t = line;
    while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
    if (t.empty() || t.rfind("[Switching focus", 0) == 0 || t.rfind("[Current focus", 0) == 0 ||
        t.find("kernel ") == 0) {
      continue;
    }
    if (cur->error.size() < 300)
      cur->error += (cur->error.empty() ? "" : "; ") + std::string(t.substr(0, 120));
  }
  return out;
}

void AppendExCommands(const std::string& script, std::vector<std::string>* argv) {
  size_t start = 0;
  while (start < script.size()) {
    size_t end = script.find('\n', start);
    if (end == std::string::npos) end = script.size();
    if (end > start) {
      argv->push_back("-ex");
      argv->push_back(script.substr(start, end - start));
    }
    start = end + 1;
  }
}

std::vector<std::string> CudaGdbCommand(int pid, const std::string& script) {
  std::vector<std::string> argv = {
      "cuda-gdb", "-p",   std::to_string(pid),          "-batch", "-nx",
      "-q",       "-iex", "set debuginfod enabled off", "-iex",   "set index-cache enabled on"};
  AppendExCommands(script, &argv);
  return argv;
}

}  // namespace xpu::cuda_gdb
