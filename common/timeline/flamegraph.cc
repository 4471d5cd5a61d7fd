#include "common/timeline/flamegraph.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/record/op_kind.h"
#include "common/timeline/callsite_join.h"
#include "common/timeline/trace_model.h"

namespace xpu::timeline {
namespace {

FrameKind KindOf(uint16_t kind) {
  if (kind == XPU_OP_GEMM) return FrameKind::kGemm;
  if (xpu_op_is_collective(kind)) return FrameKind::kCollective;
  return FrameKind::kOther;
}

// Frames must not contain the folded format's separators.
std::string Clean(std::string s) {
  for (char& c : s) {
    if (c == ';' || c == '\n' || c == '\r') c = ',';
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::string XmlEscape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '&':
        o += "&amp;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        if (static_cast<unsigned char>(c) >= 0x20) o.push_back(c);
    }
  }
  return o;
}

struct Node {
  std::string name;
  uint64_t weight = 0;
  uint64_t by_kind[3] = {0, 0, 0};
  std::map<std::string, std::unique_ptr<Node>> children;
};

FrameKind Dominant(const Node& n) {
  int best = 0;
  for (int i = 1; i < 3; ++i) {
    if (n.by_kind[i] > n.by_kind[best]) best = i;
  }
  return static_cast<FrameKind>(best);
}

const char* Colour(FrameKind k, size_t depth) {
  // GEMM: oranges; collective: blues; other: greys. Two shades alternate
  // with depth so that neighbours stay distinguishable.
  static const char* const kGemm[] = {"#f28e2b", "#f5a65b"};
  static const char* const kColl[] = {"#4e79a7", "#76a0cf"};
  static const char* const kOther[] = {"#a0a0a0", "#bdbdbd"};
  switch (k) {
    case FrameKind::kGemm:
      return kGemm[depth % 2];
    case FrameKind::kCollective:
      return kColl[depth % 2];
    default:
      return kOther[depth % 2];
  }
}

}  // namespace

bool IsCallsiteName(const std::string& name) {
  if (name.empty()) return false;
  for (absl::string_view f : absl::StrSplit(name, ';')) {
    const size_t at = f.find('@');
    const size_t colon = f.rfind(':');
    if (at == absl::string_view::npos || colon == absl::string_view::npos || colon < at)
      return false;
  }
  return true;
}

std::map<std::string, FoldedStack> BuildCallsiteStacks(const std::vector<RankDump>& ranks,
                                                       const CallsiteOptions& opt,
                                                       CallsiteStats* stats) {
  std::map<std::string, FoldedStack> out;
  CallsiteStats st;
  for (const RankDump& d : ranks) {
    analysis::RankTrace t = ToRankTrace(d);
    // Folded prefix per call-site signature (outermost first).
    std::map<uint32_t, std::string> prefix;
    for (const auto& [id, s] : t.sigs) {
      if ((s.kind != XPU_OP_PY_CALLSITE && s.kind != XPU_OP_ANNOTATION) || !IsCallsiteName(s.name))
        continue;
      std::vector<std::string> frames = absl::StrSplit(s.name, ';');
      std::reverse(frames.begin(), frames.end());
      for (std::string& f : frames) f = Clean(f);
      prefix[id] = absl::StrJoin(frames, ";");
    }
    if (prefix.empty()) continue;
    const CallsiteJoin join = JoinCallsites(t);
    // Launches joined exactly are taken before any fallback placement.
    std::vector<bool> claimed(t.ops.size(), false);
    for (size_t launch : join.launch_of) {
      if (launch != CallsiteJoin::kNone) claimed[launch] = true;
    }
    std::vector<size_t> gpu;  // GPU ops in launch order, built on first use
    bool gpu_built = false;
    auto add = [&](const std::string& stack, const analysis::Op* linked) {
      std::string key = stack;
      FrameKind kind = FrameKind::kOther;
      uint64_t w = opt.unlinked_weight_ns;
      if (linked != nullptr) {
        const analysis::OpSig* s = t.Sig(linked->sig_id);
        kind = KindOf(linked->kind);
        absl::StrAppend(&key, ";[", record::OpKindName(linked->kind), "] ", Clean(EventName(*s)));
        w = std::max<uint64_t>(linked->dur_ns, 1);
      } else {
        ++st.unlinked;
        key += ";[unlinked]";
      }
      FoldedStack& f = out[key];
      f.weight += w;
      ++f.samples;
      f.kind = kind;
    };
    for (size_t i = 0; i < t.ops.size(); ++i) {
      const analysis::Op& a = t.ops[i];
      auto p = prefix.find(a.sig_id);
      if (p == prefix.end()) continue;
      ++st.samples;
      if (IsCallsiteLink(a)) {
        const size_t launch = join.launch_of[i];
        if (launch != CallsiteJoin::kNone) ++st.linked_exact;
        add(p->second, launch != CallsiteJoin::kNone ? &t.ops[launch] : nullptr);
        continue;
      }
      // Free-standing event: first unclaimed launch within the gap after it.
      if (!gpu_built) {
        for (size_t k = 0; k < t.ops.size(); ++k) {
          if (analysis::IsGpuOp(t.ops[k].kind) && (t.ops[k].flags & XPU_REC_PLUGIN) == 0)
            gpu.push_back(k);
        }
        std::sort(gpu.begin(), gpu.end(),
                  [&](size_t x, size_t y) { return t.ops[x].launch_ns() < t.ops[y].launch_ns(); });
        gpu_built = true;
      }
      const analysis::Op* linked = nullptr;
      auto it = std::lower_bound(gpu.begin(), gpu.end(), a.start_ns,
                                 [&](size_t k, uint64_t ts) { return t.ops[k].launch_ns() < ts; });
      for (; it != gpu.end() && t.ops[*it].launch_ns() <= a.start_ns + opt.max_gap_ns; ++it) {
        if (!claimed[*it]) {
          linked = &t.ops[*it];
          claimed[*it] = true;
          ++st.linked_nearby;
          break;
        }
      }
      add(p->second, linked);
    }
  }
  if (stats) *stats = st;
  return out;
}

std::string FoldedText(const std::map<std::string, FoldedStack>& stacks) {
  std::string o;
  for (const auto& [k, f] : stacks) absl::StrAppend(&o, k, " ", f.weight, "\n");
  return o;
}

std::string FlameGraphSvg(const std::map<std::string, FoldedStack>& stacks,
                          const std::string& title, int width) {
  Node root;
  root.name = "all";
  size_t max_depth = 0;
  for (const auto& [k, f] : stacks) {
    std::vector<std::string> frames = absl::StrSplit(k, ';');
    Node* n = &root;
    n->weight += f.weight;
    n->by_kind[static_cast<int>(f.kind)] += f.weight;
    for (const std::string& fr : frames) {
      auto& c = n->children[fr];
      if (!c) {
        c = std::make_unique<Node>();
        c->name = fr;
      }
      n = c.get();
      n->weight += f.weight;
      n->by_kind[static_cast<int>(f.kind)] += f.weight;
    }
    max_depth = std::max(max_depth, frames.size());
  }
  const int kRow = 16, kTop = 40, kPad = 10;
  const int height = kTop + static_cast<int>(max_depth + 1) * kRow + kPad + 20;
  const double usable = width - 2 * kPad;
  std::string o = absl::StrFormat(
      "<?xml version=\"1.0\" standalone=\"no\"?>\n"
      "<svg version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
      "xmlns=\"http://www.w3.org/2000/svg\">\n"
      "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#ffffff\"/>\n"
      "<text x=\"%d\" y=\"20\" font-family=\"Verdana\" font-size=\"15\">%s</text>\n"
      "<text x=\"%d\" y=\"34\" font-family=\"Verdana\" font-size=\"11\" fill=\"#555\">"
      "orange: GEMM, blue: collective, grey: other; width: GPU time of the launches</text>\n",
      width, height, width, height, width, height, kPad, XmlEscape(title), kPad);
  if (root.weight == 0) return o + "</svg>\n";
  // Root at the bottom, callees above (classic flame graph orientation).
  struct Item {
    const Node* n;
    double x;
    size_t depth;
  };
  std::vector<Item> todo = {{&root, static_cast<double>(kPad), 0}};
  uint64_t frames_drawn = 0;
  while (!todo.empty()) {
    Item it = todo.back();
    todo.pop_back();
    const double w = usable * static_cast<double>(it.n->weight) / static_cast<double>(root.weight);
    if (w < 0.1) continue;
    const int y = height - kPad - 20 - static_cast<int>(it.depth + 1) * kRow;
    const double share = 100.0 * it.n->weight / root.weight;
    absl::StrAppendFormat(
        &o,
        "<g><title>%s (%.0f ns, %.2f%%)</title><rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" "
        "height=\"%d\" fill=\"%s\" rx=\"2\" ry=\"2\"/>",
        XmlEscape(it.n->name), static_cast<double>(it.n->weight), share, it.x, y, w, kRow - 1,
        Colour(it.depth == 0 ? FrameKind::kOther : Dominant(*it.n), it.depth));
    const size_t chars = static_cast<size_t>(w / 7);
    if (chars >= 3) {
      std::string label =
          it.n->name.size() <= chars ? it.n->name : it.n->name.substr(0, chars - 2) + "..";
      absl::StrAppendFormat(
          &o, "<text x=\"%.2f\" y=\"%d\" font-family=\"Verdana\" font-size=\"11\">%s</text>",
          it.x + 3, y + kRow - 4, XmlEscape(label));
    }
    o += "</g>\n";
    ++frames_drawn;
    double x = it.x;
    for (const auto& [name, c] : it.n->children) {
      todo.push_back({c.get(), x, it.depth + 1});
      x += usable * static_cast<double>(c->weight) / static_cast<double>(root.weight);
    }
  }
  return o + "</svg>\n";
}

}  // namespace xpu::timeline
