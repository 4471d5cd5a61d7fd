// engine/hang/stack_tree.h — the stacks of all ranks merged into one tree
// (the call-stack analysis of the XPUTimer paper, §5.1): every node is a
// frame path from the thread roots; it carries the ranks with at least one
// thread through it and, by difference, the ranks without. Renders a
// readable text view, folded stacks and an SVG flame graph.
//
// Thread-safety: not synchronised. Copies share nodes: build a tree, then
// copy it freely, but do not Add() to a copy.
#ifndef XPU_ENGINE_HANG_STACK_TREE_H_
#define XPU_ENGINE_HANG_STACK_TREE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/hang/stacks.h"

namespace xpu::engine::hang {

class StackTree {
 public:
  struct Node {
    std::string frame;
    std::set<int32_t> ranks;
    uint64_t stacks = 0;  // (rank, thread) stacks through this node
    std::map<std::string, std::shared_ptr<Node>>
        children;  // shared: copies of a built tree share its nodes
  };

  // Adds every thread of `rank` (Python threads are prefixed with a
  // "[python]" root so that they do not mix with native frames).
  void Add(int32_t rank, const std::vector<ThreadStack>& threads);
  // Declares a rank that has no stacks (gone, debugger failed): it appears
  // in every "not in" set.
  void AddRank(int32_t rank) { all_ranks_.insert(rank); }

  const Node& root() const { return root_; }
  const std::set<int32_t>& all_ranks() const { return all_ranks_; }

  // Indented tree; a chain of nodes with identical rank sets is folded into
  // one line ("a > b > c"), each line ends with "[ranks R] [not N]".
  // `max_lines` bounds the output (0 = unbounded).
  std::string Text(size_t max_lines = 400) const;
  // "root;child;leaf <count>" per distinct path (count = stacks).
  std::string Folded() const;
  // A flame graph (width = stacks), titled `title`; frames show their ranks
  // in the tooltip.
  std::string Svg(const std::string& title) const;

 private:
  Node root_;
  std::set<int32_t> all_ranks_;
};

// "ranks 0-2,5 | not 3-4" for a node.
std::string RankLabel(const std::set<int32_t>& in, const std::set<int32_t>& all);

}  // namespace xpu::engine::hang

#endif  // XPU_ENGINE_HANG_STACK_TREE_H_
