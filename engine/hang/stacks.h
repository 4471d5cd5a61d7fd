// engine/hang/stacks.h — call stacks of hung processes: parsing the text the
// daemons collect (gdb / cuda-gdb `thread apply all bt`, Python faulthandler
// dumps, py-spy dumps) into frames, and compressing rank sets ("0-2,5-7").
//
// The input comes from other machines: parsers never fail, they skip what
// they do not understand and bound what they keep.
//
// Thread-safety: pure functions.
#ifndef XPU_ENGINE_HANG_STACKS_H_
#define XPU_ENGINE_HANG_STACKS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace xpu::engine::hang {

struct ThreadStack {
  std::string thread;               // "LWP 123 \"python\"" / "Thread 0x7f.." / "MainThread"
  bool python = false;              // frames are Python functions
  std::vector<std::string> frames;  // outermost (root) first
};

// gdb / cuda-gdb `thread apply all bt`. Frames are reduced to the function
// name ("ncclAllReduce", "??" when unknown); the "Thread N (...)" headers
// start a new stack.
std::vector<ThreadStack> ParseGdbBacktrace(std::string_view text);
// Python faulthandler ("File \"f.py\", line 3 in func") and py-spy dump
// ("    func (f.py:3)") output; frames become "func (f.py)".
std::vector<ThreadStack> ParsePythonStacks(std::string_view text);

// "0-2,5,7-9" for a set of ranks (any order, duplicates ignored); "-" when
// empty.
std::string CompressRanks(std::vector<int32_t> ranks);

// The thread that runs the program: rooted in main / <module> / named
// MainThread; else the deepest. nullptr when there is none.
const ThreadStack* MainThread(const std::vector<ThreadStack>& threads);
// "a > b > c": the `n` innermost frames.
std::string Innermost(const ThreadStack& t, size_t n);

// True for frames of collective communication or of waiting for it: NCCL
// (nccl*, ncclDevKernel, ncclProxy), c10d / ProcessGroupNCCL, torch
// distributed Python (all_reduce, barrier, wait), and the CUDA synchronisation
// calls a host thread blocks in while a collective runs on its stream.
bool IsCommunicationFrame(std::string_view frame);

}  // namespace xpu::engine::hang

#endif  // XPU_ENGINE_HANG_STACKS_H_
