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
    case NcclProto::kLL:
    case NcclProto::kLL128: return ll_flag;
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

std::string ProgressScript(const std::vector<CudaKernel>& kernels, int max_channels) {
  std::string s = "set pagination off\nset confirm off\nset cuda break_on_launch none\n";
  for (const CudaKernel& k : kernels) {
    const int blocks = k.grid_x > 0 ? std::min(k.grid_x, max_channels) : 1;
    for (int c = 0; c < blocks; ++c) {
      const std::string id = "kernel=" + std::to_string(k.id) + " channel=" + std::to_string(c);
      s += "cuda kernel " + std::to_string(k.id) + " block (" + std::to_string(c) + ",0,0) thread (0,0,0)\n";
      s += "echo XPU-NCCL-BEGIN " + id + "\\n\n";
      s += "printf \"XPU-NCCL " + id +
           " ring_prev=%d ring_next=%d\\n\", ncclShmem.channel.ring.prev, ncclShmem.channel.ring.next\n";
      s += "printf \"XPU-NCCL " + id +
           " recv_step=%llu recv_tail=%llu\\n\", ncclShmem.groups[0].recvConns[0]->step, "
           "*ncclShmem.groups[0].recvConns[0]->tail\n";
      s += "printf \"XPU-NCCL " + id +
           " send_step=%llu send_head=%llu\\n\", ncclShmem.groups[0].sendConns[0]->step, "
           "*ncclShmem.groups[0].sendConns[0]->head\n";
      if (k.proto == NcclProto::kLL) {
        // union ncclLLFifoLine { struct { uint32_t data1, flag1, data2, flag2; }; ... }
        s += "printf \"XPU-NCCL " + id +
             " ll_flag=%u\\n\", ((unsigned int*)ncclShmem.groups[0].recvConns[0]->buffs[0])[1]\n";
      } else if (k.proto == NcclProto::kLL128) {
        // NCCL_LL128_LINEELEMS = 16 uint64_t per line, the flag is the last.
        s += "printf \"XPU-NCCL " + id +
             " ll_flag=%llu\\n\", ((unsigned long long*)ncclShmem.groups[0].recvConns[0]->buffs[1])[15]\n";
      }
      s += "echo XPU-NCCL-END " + id + "\\n\n";
    }
  }
  s += "detach\nquit\n";
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
      cur->ok = cur->error.empty() && cur->ring_prev >= 0;
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

std::vector<std::string> CudaGdbCommand(int pid, const std::string& script_path) {
  return {"cuda-gdb", "-p", std::to_string(pid), "-batch", "-nx", "-q", "-x", script_path};
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
