// engine/hang/stacks.cc — see stacks.h.
#include "engine/hang/stacks.h"

#include <algorithm>
#include <cctype>

namespace xpu::engine::hang {
namespace {

constexpr size_t kMaxFrames = 256;
constexpr size_t kMaxThreads = 4096;
constexpr size_t kMaxFrameLen = 200;

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.push_back(line);
    start = end + 1;
  }
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

std::string Clip(std::string_view s) {
  std::string out(s.substr(0, kMaxFrameLen));
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  return out;
}

// "#3  0x00007f.. in ncclAllReduce (a=1) at x.cc:4" -> "ncclAllReduce";
// "#0  pause () at ..." -> "pause".
std::string GdbFrameName(std::string_view line) {
  size_t sp = line.find_first_of(" \t");
  if (sp == std::string_view::npos) return "??";
  std::string_view rest = Trim(line.substr(sp));
  if (StartsWith(rest, "0x")) {
    size_t in = rest.find(" in ");
    if (in == std::string_view::npos) return "??";
    rest = Trim(rest.substr(in + 4));
  }
  // "name (args) at file:line" / "name (args) from lib": drop the location,
  // then the argument list, found as the last balanced "(...)" (names
  // themselves may hold "(anonymous namespace)" or "std::function<void ()>").
  size_t loc = rest.rfind(") at ");
  if (loc == std::string_view::npos) loc = rest.rfind(") from ");
  if (loc != std::string_view::npos) rest = rest.substr(0, loc + 1);
  size_t cut = rest.size();
  if (!rest.empty() && rest.back() == ')') {
    int depth = 0;
    for (size_t i = rest.size(); i-- > 0;) {
      if (rest[i] == ')') ++depth;
      if (rest[i] == '(' && --depth == 0) {
        cut = i;
        break;
      }
    }
  }
  std::string_view name = Trim(rest.substr(0, cut));
  return name.empty() ? "??" : Clip(name);
}

}  // namespace

std::vector<ThreadStack> ParseGdbBacktrace(std::string_view text) {
  std::vector<ThreadStack> out;
  ThreadStack* cur = nullptr;
  for (std::string_view raw : Lines(text)) {
    std::string_view line = Trim(raw);
    if (StartsWith(line, "Thread ") && line.find('(') != std::string_view::npos) {
      if (out.size() >= kMaxThreads) break;
      out.emplace_back();
      cur = &out.back();
      size_t lwp = line.find("LWP ");
      std::string_view id = lwp != std::string_view::npos ? line.substr(lwp) : line.substr(7);
      size_t close = id.find(')');
      std::string name(Clip(id.substr(0, close)));
      size_t q = line.find('"');
      if (q != std::string_view::npos) {
        size_t q2 = line.find('"', q + 1);
        if (q2 != std::string_view::npos) name += " " + Clip(line.substr(q, q2 - q + 1));
      }
      cur->thread = name;
      continue;
    }
    if (line.size() < 2 || line[0] != '#' || !isdigit(static_cast<unsigned char>(line[1])))
      continue;
    if (cur == nullptr) {  // a single-threaded `bt` without a header
      out.emplace_back();
      cur = &out.back();
      cur->thread = "thread";
    }
    if (cur->frames.size() < kMaxFrames) cur->frames.push_back(GdbFrameName(line));
  }
  for (ThreadStack& t : out) std::reverse(t.frames.begin(), t.frames.end());
  out.erase(
      std::remove_if(out.begin(), out.end(), [](const ThreadStack& t) { return t.frames.empty(); }),
      out.end());
  return out;
}

std::vector<ThreadStack> ParsePythonStacks(std::string_view text) {
  std::vector<ThreadStack> out;
  ThreadStack* cur = nullptr;
  for (std::string_view raw : Lines(text)) {
    std::string_view line = Trim(raw);
    if (line.empty()) continue;
    // faulthandler: "Thread 0x00007f (most recent call first):",
    // "Current thread 0x... (most recent call first):"; py-spy:
    // "Thread 4242 (idle): \"MainThread\"".
    if ((StartsWith(line, "Thread ") || StartsWith(line, "Current thread ")) &&
        (line.back() == ':' || line.find("): ") != std::string_view::npos)) {
      if (out.size() >= kMaxThreads) break;
      out.emplace_back();
      cur = &out.back();
      cur->python = true;
      size_t q = line.find('"');
      cur->thread = q != std::string_view::npos ? Clip(line.substr(q))
                                                : Clip(line.substr(0, line.find(" (")));
      continue;
    }
    if (cur == nullptr || cur->frames.size() >= kMaxFrames) continue;
    if (StartsWith(line, "File \"")) {
      size_t q2 = line.find('"', 6);
      size_t in = line.rfind(" in ");
      if (q2 == std::string_view::npos || in == std::string_view::npos) continue;
      std::string_view file = line.substr(6, q2 - 6);
      size_t slash = file.rfind('/');
      if (slash != std::string_view::npos) file.remove_prefix(slash + 1);
      cur->frames.push_back(
          Clip(std::string(Trim(line.substr(in + 4))) + " (" + std::string(file) + ")"));
      continue;
    }
    // py-spy: "func (path/file.py:12)"
    size_t open = line.rfind(" (");
    if (open != std::string_view::npos && line.back() == ')') {
      std::string_view func = line.substr(0, open);
      std::string_view loc = line.substr(open + 2, line.size() - open - 3);
      size_t colon = loc.rfind(':');
      if (colon != std::string_view::npos) loc = loc.substr(0, colon);
      size_t slash = loc.rfind('/');
      if (slash != std::string_view::npos) loc.remove_prefix(slash + 1);
      cur->frames.push_back(Clip(std::string(func) + " (" + std::string(loc) + ")"));
    }
  }
  for (ThreadStack& t : out) std::reverse(t.frames.begin(), t.frames.end());
  out.erase(
      std::remove_if(out.begin(), out.end(), [](const ThreadStack& t) { return t.frames.empty(); }),
      out.end());
  return out;
}

std::string CompressRanks(std::vector<int32_t> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  if (ranks.empty()) return "-";
  std::string out;
  size_t i = 0;
  while (i < ranks.size()) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

const ThreadStack* MainThread(const std::vector<ThreadStack>& threads) {
  const ThreadStack* best = nullptr;
  for (const ThreadStack& t : threads) {
    if (t.frames.empty()) continue;
    const std::string& root = t.frames.front();
    const bool is_main = root == "main" || root == "__libc_start_main" || root == "_start" ||
                         root.find("<module>") == 0 ||
                         t.thread.find("MainThread") != std::string::npos;
    if (is_main) return &t;
    if (best == nullptr || t.frames.size() > best->frames.size()) best = &t;
  }
  return best;
}

std::string Innermost(const ThreadStack& t, size_t n) {
  std::string out;
  const size_t size = t.frames.size();
  for (size_t i = size > n ? size - n : 0; i < size; ++i)
    out += (out.empty() ? "" : " > ") + t.frames[i];
  return out;
}

bool IsCommunicationFrame(std::string_view f) {
  static const char* const kNeedles[] = {
      "nccl",
      "NCCL",
      "ProcessGroupNCCL",
      "c10d::",
      "c10d.",
      "all_reduce",
      "all_gather",
      "reduce_scatter",
      "broadcast (",
      "barrier (",
      "all_to_all",
      "cudaStreamSynchronize",
      "cudaDeviceSynchronize",
      "cudaEventSynchronize",
      "cuStreamSynchronize",
      "cuCtxSynchronize",
      "cuEventSynchronize",
      "synchronize (",
  };
  for (const char* n : kNeedles) {
    if (f.find(n) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace xpu::engine::hang
