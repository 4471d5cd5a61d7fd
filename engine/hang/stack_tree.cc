// engine/hang/stack_tree.cc — see stack_tree.h.
#include "engine/hang/stack_tree.h"

#include <algorithm>
#include <cstdio>
#include <functional>

namespace xpu::engine::hang {
namespace {

std::string XmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// Deterministic warm colour per frame name (communication frames blue).
std::string Colour(const std::string& frame) {
  uint32_t h = 2166136261u;
  for (char c : frame) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  char buf[32];
  if (IsCommunicationFrame(frame)) {
    snprintf(buf, sizeof(buf), "rgb(%u,%u,%u)", 80 + h % 40, 130 + (h >> 8) % 50, 220);
  } else {
    snprintf(buf, sizeof(buf), "rgb(%u,%u,%u)", 220 + h % 35, 90 + (h >> 8) % 110,
             40 + (h >> 16) % 40);
  }
  return buf;
}

}  // namespace

std::string RankLabel(const std::set<int32_t>& in, const std::set<int32_t>& all) {
  std::vector<int32_t> yes(in.begin(), in.end()), no;
  for (int32_t r : all) {
    if (!in.count(r)) no.push_back(r);
  }
  return "ranks " + CompressRanks(yes) + " | not " + CompressRanks(no);
}

void StackTree::Add(int32_t rank, const std::vector<ThreadStack>& threads) {
  all_ranks_.insert(rank);
  for (const ThreadStack& t : threads) {
    Node* n = &root_;
    n->ranks.insert(rank);
    ++n->stacks;
    std::vector<std::string> frames;
    if (t.python) frames.push_back("[python]");
    frames.insert(frames.end(), t.frames.begin(), t.frames.end());
    for (const std::string& f : frames) {
      std::shared_ptr<Node>& child = n->children[f];
      if (!child) {
        child = std::make_shared<Node>();
        child->frame = f;
      }
      n = child.get();
      n->ranks.insert(rank);
      ++n->stacks;
    }
  }
}

std::string StackTree::Text(size_t max_lines) const {
  std::string out;
  size_t lines = 0;
  std::function<void(const Node&, int)> walk = [&](const Node& n, int depth) {
    // Children with the most ranks first, then by name (stable output).
    std::vector<const Node*> kids;
    for (const auto& [name, c] : n.children) kids.push_back(c.get());
    std::stable_sort(kids.begin(), kids.end(), [](const Node* a, const Node* b) {
      return a->ranks.size() > b->ranks.size();
    });
    for (const Node* c : kids) {
      if (max_lines != 0 && lines >= max_lines) return;
      // Fold a chain whose rank set does not change.
      std::string label = c->frame;
      const Node* tail = c;
      while (tail->children.size() == 1 && tail->children.begin()->second->ranks == tail->ranks) {
        tail = tail->children.begin()->second.get();
        label += " > " + tail->frame;
      }
      out += std::string(static_cast<size_t>(depth) * 2, ' ') + label + "  [" +
             RankLabel(tail->ranks, all_ranks_) + "]\n";
      ++lines;
      walk(*tail, depth + 1);
    }
  };
  walk(root_, 0);
  if (max_lines != 0 && lines >= max_lines) out += "... (truncated)\n";
  return out;
}

std::string StackTree::Folded() const {
  std::string out;
  std::function<void(const Node&, const std::string&)> walk = [&](const Node& n,
                                                                  const std::string& path) {
    uint64_t through_children = 0;
    for (const auto& [name, c] : n.children) through_children += c->stacks;
    if (&n != &root_ && n.stacks > through_children) {
      out += path + " " + std::to_string(n.stacks - through_children) + "\n";
    }
    for (const auto& [name, c] : n.children) {
      std::string f = c->frame;
      std::replace(f.begin(), f.end(), ';', ':');
      std::replace(f.begin(), f.end(), ' ', '_');
      walk(*c, path.empty() ? f : path + ";" + f);
    }
  };
  walk(root_, "");
  return out;
}

std::string StackTree::Svg(const std::string& title) const {
  const double kWidth = 1200, kRow = 17, kTop = 30;
  int max_depth = 0;
  std::function<void(const Node&, int)> depth = [&](const Node& n, int d) {
    max_depth = std::max(max_depth, d);
    for (const auto& [name, c] : n.children) depth(*c, d + 1);
  };
  depth(root_, 0);
  const double height = kTop + (max_depth + 1) * kRow + 10;
  std::string out;
  char buf[512];
  snprintf(
      buf, sizeof(buf),
      "<?xml version=\"1.0\" standalone=\"no\"?>\n"
      "<svg version=\"1.1\" width=\"%.0f\" height=\"%.0f\" xmlns=\"http://www.w3.org/2000/svg\">\n"
      "<rect x=\"0\" y=\"0\" width=\"100%%\" height=\"100%%\" fill=\"#f8f8f8\"/>\n"
      "<text x=\"%.0f\" y=\"20\" font-size=\"15\" font-family=\"Verdana\" text-anchor=\"middle\">",
      kWidth, height, kWidth / 2);
  out += buf;
  out += XmlEscape(title) + "</text>\n";
  if (root_.stacks == 0) return out + "</svg>\n";
  const double scale = (kWidth - 20) / static_cast<double>(root_.stacks);
  // Icicle layout, roots at the bottom like a flame graph.
  std::function<void(const Node&, double, int)> draw = [&](const Node& n, double x, int d) {
    double cx = x;
    for (const auto& [name, c] : n.children) {
      const double w = static_cast<double>(c->stacks) * scale;
      const double y = height - 10 - (d + 1) * kRow;
      const std::string tip = c->frame + " (" + RankLabel(c->ranks, all_ranks_) + ")";
      snprintf(buf, sizeof(buf),
               "<g><title>%s</title><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
               "fill=\"%s\" rx=\"2\"/>",
               XmlEscape(tip).c_str(), cx, y, std::max(w - 0.5, 0.1), kRow - 1,
               Colour(c->frame).c_str());
      out += buf;
      const size_t chars = static_cast<size_t>(w / 7);
      if (chars >= 3) {
        std::string label =
            c->frame.size() > chars ? c->frame.substr(0, chars - 2) + ".." : c->frame;
        snprintf(buf, sizeof(buf),
                 "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" font-family=\"Verdana\">", cx + 3,
                 y + 12);
        out += buf;
        out += XmlEscape(label) + "</text>";
      }
      out += "</g>\n";
      draw(*c, cx, d + 1);
      cx += w;
    }
  };
  snprintf(buf, sizeof(buf), "<!-- %llu stacks -->\n",
           static_cast<unsigned long long>(root_.stacks));
  out += buf;
  draw(root_, 10, 0);
  out += "</svg>\n";
  return out;
}

}  // namespace xpu::engine::hang
