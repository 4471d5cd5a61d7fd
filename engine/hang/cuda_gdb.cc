// engine/hang/cuda_gdb.cc — see cuda_gdb.h.
#include "engine/hang/cuda_gdb.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>

namespace xpu::engine::hang {
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

}  // namespace

const char* NcclProtoName(NcclProto p) {
  switch (p) {
    case NcclProto::kSimple: return "SIMPLE";
    case NcclProto::kLL: return "LL";
    case NcclProto::kLL128: return "LL128";
    default: return "unknown";
  }
}

uint64_t ChannelProgress::Progress(NcclProto proto) const {
  switch (proto) {
    case NcclProto::kLL: return ll_flag;
    case NcclProto::kLL128: return ll128_flag != 0 ? ll128_flag : ll_flag;
    default: return recv_tail;
  }
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

// Field offsets in NCCL 2.28's device structures (src/device/common.h
// ncclShmemData, src/include/device.h ncclConnInfo / ncclDevChannel /
// ncclRing; x86-64 and device layouts agree), measured with offsetof on the
// v2.28.9 sources. The NCCL in the PyTorch wheels carries no debug info for
// ncclShmem ("has unknown type"), so the script reads raw memory at these
// offsets instead of naming fields.
struct NcclLayout {
  int ring_prev = 152;         // ncclShmem.channel.ring.prev (int); .next at +4
  int recv_conn0 = 552;        // ncclShmem.groups[0].recvConns[0] (ncclConnInfo*)
  int send_conn0 = 608;        // ncclShmem.groups[0].sendConns[0]
  int conn_buffs = 0;          // ncclConnInfo.buffs[NCCL_NUM_PROTOCOLS]: LL 0, LL128 1, SIMPLE 2
  int conn_tail = 48;          // ncclConnInfo.tail (uint64_t*)
  int conn_head = 56;          // ncclConnInfo.head (uint64_t*)
  int conn_step = 104;         // ncclConnInfo.step (uint64_t)
  int ll_flag1 = 4;            // union ncclLLFifoLine: data1, flag1, data2, flag2 (uint32)
  int ll128_flag = 15 * 8;     // NCCL_LL128_LINEELEMS = 16 uint64_t per line, the flag is the last
};

namespace {

std::string At(const char* type, const std::string& base, int off) {
  return "*(" + std::string(type) + "*)(" + base + "+" + std::to_string(off) + ")";
}

// Commands that print one channel's counters; kUnknown prints the flags of
// both LL protocols (the caller learns the protocol later). Two blocks per
// channel, one per way of addressing ncclShmem: through the generic address
// of the symbol (`&ncclShmem` is a generic pointer into the block's shared
// window), and as offset 0 of the shared window (the kernel's only static
// __shared__ variable). Whichever cuda-gdb can read gives the ring line; the
// other prints errors (ChannelsToProgress keeps the readable one).
void AppendChannel(int kernel, int channel, NcclProto proto, std::string* s) {
  const NcclLayout L;
  const std::string id = "kernel=" + std::to_string(kernel) + " channel=" + std::to_string(channel);
  *s += "cuda kernel " + std::to_string(kernel) + " block (" + std::to_string(channel) + ",0,0) thread (0,0,0)\n";
  struct Base {
    const char* set;    // value of $xs
    const char* space;  // qualifier of the reads at $xs
  };
  for (const Base& b : {Base{"(char*)&ncclShmem", ""}, Base{"(@shared char*)0", "@shared "}}) {
    const std::string sp = b.space;
    *s += "echo XPU-NCCL-BEGIN " + id + "\\n\n";
    *s += "set $xs = " + std::string(b.set) + "\n";
    *s += "printf \"XPU-NCCL " + id + " ring_prev=%d ring_next=%d\\n\", " + At((sp + "int").c_str(), "$xs", L.ring_prev) +
          ", " + At((sp + "int").c_str(), "$xs", L.ring_prev + 4) + "\n";
    *s += "set $xr = " + At((sp + "unsigned long long").c_str(), "$xs", L.recv_conn0) + "\n";
    *s += "set $xn = " + At((sp + "unsigned long long").c_str(), "$xs", L.send_conn0) + "\n";
    *s += "printf \"XPU-NCCL " + id + " recv_step=%llu\\n\", " + At("unsigned long long", "$xr", L.conn_step) + "\n";
    *s += "printf \"XPU-NCCL " + id + " recv_tail=%llu\\n\", *" + At("unsigned long long*", "$xr", L.conn_tail) +
          "\n";
    *s += "printf \"XPU-NCCL " + id + " send_step=%llu\\n\", " + At("unsigned long long", "$xn", L.conn_step) + "\n";
    *s += "printf \"XPU-NCCL " + id + " send_head=%llu\\n\", *" + At("unsigned long long*", "$xn", L.conn_head) +
          "\n";
    if (proto == NcclProto::kLL || proto == NcclProto::kUnknown) {
      *s += "printf \"XPU-NCCL " + id + " ll_flag=%u\\n\", " +
            At("unsigned int", At("unsigned long long", "$xr", L.conn_buffs + 0), L.ll_flag1) + "\n";
    }
    if (proto == NcclProto::kLL128 || proto == NcclProto::kUnknown) {
      *s += "printf \"XPU-NCCL " + id + " ll128_flag=%llu\\n\", " +
            At("unsigned long long", At("unsigned long long", "$xr", L.conn_buffs + 8), L.ll128_flag) + "\n";
    }
    *s += "echo XPU-NCCL-END " + id + "\\n\n";
  }
}

}  // namespace

std::string ProgressScript(const std::vector<CudaKernel>& kernels, int max_channels) {
  std::string s = "set pagination off\nset confirm off\nset cuda break_on_launch none\n";
  for (const CudaKernel& k : kernels) {
    const int blocks = k.grid_x > 0 ? std::min(k.grid_x, max_channels) : 1;
    for (int c = 0; c < blocks; ++c) AppendChannel(k.id, c, k.proto, &s);
  }
  s += "detach\nquit\n";
  return s;
}

std::string BlindProgressCommands(int max_kernels, int max_channels) {
  std::string s = "set cuda break_on_launch none\necho XPU-CUDA-KERNELS\\n\ninfo cuda kernels\n";
  for (int k = 0; k < max_kernels; ++k) {
    for (int c = 0; c < max_channels; ++c) AppendChannel(k, c, NcclProto::kUnknown, &s);
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
      if (Field(l, "channel", &v)) cur->channel = static_cast<int>(v);
      continue;
    }
    if (cur == nullptr) continue;
    if (line.rfind("XPU-NCCL-END ", 0) == 0) {
      // Readable when the ring neighbours came out; errors of single
      // expressions (e.g. the symbol form of the shared-window base) stay
      // as notes.
      cur->ok = cur->ring_prev >= 0;
      cur = nullptr;
      continue;
    }
    if (line.rfind("XPU-NCCL ", 0) == 0) {
      std::string l = " " + std::string(line.substr(9));
      uint64_t v = 0;
      if (Field(l, "ring_prev", &v)) cur->ring_prev = static_cast<int>(v);
      if (Field(l, "ring_next", &v)) cur->ring_next = static_cast<int>(v);
      if (Field(l, "recv_step", &v)) cur->recv_step = v;
      if (Field(l, "recv_tail", &v)) cur->recv_tail = v;
      if (Field(l, "send_step", &v)) cur->send_step = v;
      if (Field(l, "send_head", &v)) cur->send_head = v;
      if (Field(l, "ll_flag", &v)) cur->ll_flag = v;
      if (Field(l, "ll128_flag", &v)) cur->ll128_flag = v;
      continue;
    }
    // Anything else inside a block is cuda-gdb talking: errors such as
    // "No symbol "ncclShmem" in current context." or "Invalid coordinates".
    std::string_view t = line;
    while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
    if (t.empty() || t.rfind("[Switching focus", 0) == 0 || t.rfind("[Current focus", 0) == 0 ||
        t.find("kernel ") == 0) {
      continue;
    }
    if (cur->error.size() < 300) cur->error += (cur->error.empty() ? "" : "; ") + std::string(t.substr(0, 120));
  }
  return out;
}

std::vector<std::string> CudaGdbCommand(int pid, const std::string& script) {
  // One -ex per line: a failing command in a -x file would end the file,
  // while each -ex runs on its own.
  std::vector<std::string> argv = {"cuda-gdb", "-p", std::to_string(pid), "-batch", "-nx", "-q",
                                   "-iex", "set debuginfod enabled off", "-iex", "set index-cache enabled on"};
  size_t start = 0;
  while (start < script.size()) {
    size_t end = script.find('\n', start);
    if (end == std::string::npos) end = script.size();
    if (end > start) {
      argv.push_back("-ex");
      argv.push_back(script.substr(start, end - start));
    }
    start = end + 1;
  }
  return argv;
}

std::vector<KernelProgress> RingProgressFromCudaGdb(
    const std::map<int32_t, std::vector<ChannelProgress>>& by_rank, NcclProto proto,
    std::map<int32_t, std::vector<KernelProgress>>* out_by_rank) {
  std::vector<KernelProgress> all;
  // channel -> rank -> progress
  std::map<int, std::map<int32_t, const ChannelProgress*>> channels;
  for (const auto& [rank, list] : by_rank) {
    for (const ChannelProgress& c : list) {
      if (c.ok) channels[c.channel][rank] = &c;
    }
  }
  for (const auto& [channel, ranks] : channels) {
    // Order the ring by following ring_next from the lowest rank.
    std::vector<int32_t> order;
    std::set<int32_t> seen;
    int32_t r = ranks.begin()->first;
    while (ranks.count(r) && !seen.count(r)) {
      order.push_back(r);
      seen.insert(r);
      r = ranks.at(r)->ring_next;
    }
    if (order.size() != ranks.size()) continue;  // broken or partial ring: not comparable
    for (size_t pos = 0; pos < order.size(); ++pos) {
      const ChannelProgress* c = ranks.at(order[pos]);
      KernelProgress k;
      k.channel = "cuda-gdb ch" + std::to_string(channel);
      k.ring_pos = static_cast<int32_t>(pos);
      k.ring_size = static_cast<int32_t>(order.size());
      k.seq = 1;  // inside the kernel
      k.completed_seq = 0;
      k.step = c->Progress(proto);
      k.source = std::string("cuda-gdb ") + NcclProtoName(proto);
      all.push_back(k);
      if (out_by_rank != nullptr) (*out_by_rank)[order[pos]].push_back(k);
    }
  }
  return all;
}

}  // namespace xpu::engine::hang
