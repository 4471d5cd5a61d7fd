// tests/fake_runtime/fake_nccl_profiler_test_plugin.h — the log entry of the
// recording test plugin (fake_nccl_profiler_test_plugin.cc). Test-only.
#ifndef XPU_TESTS_FAKE_RUNTIME_FAKE_NCCL_PROFILER_TEST_PLUGIN_H_
#define XPU_TESTS_FAKE_RUNTIME_FAKE_NCCL_PROFILER_TEST_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct TestPluginEvent {
  enum Call : int { kInit, kStart, kStop, kState, kFinalize };
  Call call;
  uint64_t thread;  // pthread_self of the caller
  void* context;
  void* handle;  // returned by (start) or passed to (stop/state)
  void* parent;
  uint64_t type;     // event type bit (start)
  uint64_t comm_id;  // init
  int rank, nranks;
  char func[24];
  char dtype[24];
  size_t count;  // coll/p2p count; proxy op nSteps
  int nchannels;
  int root;  // coll root, p2p / proxy peer
  int channel;
  uint64_t ptimer;  // kernelCh start (start), stop pTimer or transSize (state)
  int state;
  pid_t pid;
};

// Exported by the plugin: copies up to `max` entries, returns the total.
typedef size_t (*TestPluginLogFn)(TestPluginEvent* out, size_t max);

#endif  // XPU_TESTS_FAKE_RUNTIME_FAKE_NCCL_PROFILER_TEST_PLUGIN_H_
