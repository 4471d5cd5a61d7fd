// hook/nccl_profiler/plugin_unittest.cc — the built libnccl-profiler-xpu.so
// as NCCL sees it, in a process without libxpu_hook.so: it exports exactly
// the versioned tables, its init fails (so NCCL disables it) and every other
// entry point is harmless.
// Thread-safety: single-threaded test.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>

#include "nccl_profiler_api.h"

#ifndef XPU_NCCL_PROFILER_SO
#error "XPU_NCCL_PROFILER_SO must name the built plugin"
#endif

namespace {

class PluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    handle_ = dlopen(XPU_NCCL_PROFILER_SO, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(handle_, nullptr) << dlerror();
  }
  void TearDown() override {
    if (handle_ != nullptr) dlclose(handle_);
  }
  void* handle_ = nullptr;
};

TEST_F(PluginTest, ExportsVersionedTablesOnly) {
  auto* v5 = static_cast<const xpu_nccl_profiler_v5_t*>(dlsym(handle_, "ncclProfiler_v5"));
  auto* v4 = static_cast<const xpu_nccl_profiler_v4_t*>(dlsym(handle_, "ncclProfiler_v4"));
  ASSERT_NE(v5, nullptr);
  ASSERT_NE(v4, nullptr);
  EXPECT_STREQ(v5->name, "xpu");
  EXPECT_NE(v5->init, nullptr);
  EXPECT_NE(v5->startEvent, nullptr);
  EXPECT_NE(v5->stopEvent, nullptr);
  EXPECT_NE(v5->recordEventState, nullptr);
  EXPECT_NE(v5->finalize, nullptr);
  // Nothing internal leaks (hidden visibility + version script).
  EXPECT_EQ(dlsym(handle_, "_ZN3xpu13nccl_profiler8Profiler9StopEventEPv"), nullptr);
  EXPECT_EQ(dlsym(handle_, "ncclProfiler_v3"), nullptr);
}

TEST_F(PluginTest, WithoutTheHookInitFailsAndNothingCrashes) {
  // This test binary does not define the xpu_* hook API.
  ASSERT_EQ(dlsym(RTLD_DEFAULT, "xpu_nccl_plugin_attach"), nullptr);
  auto* v5 = static_cast<const xpu_nccl_profiler_v5_t*>(dlsym(handle_, "ncclProfiler_v5"));
  ASSERT_NE(v5, nullptr);
  void* ctx = reinterpret_cast<void*>(0x1);
  int mask = 0;
  EXPECT_NE(v5->init(&ctx, 1234, &mask, "comm", 1, 4, 0, nullptr), ncclSuccess);
  EXPECT_EQ(ctx, nullptr);
  // NCCL would not call these after a failed init; a confused caller must
  // still not crash the host.
  xpu_nccl_event_descr_v5_t d;
  memset(&d, 0, sizeof(d));
  d.type = kNcclProfileColl;
  d.coll.func = "AllReduce";
  void* h = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(v5->startEvent(nullptr, &h, &d), ncclSuccess);
  EXPECT_EQ(h, nullptr);
  EXPECT_EQ(v5->stopEvent(nullptr), ncclSuccess);
  EXPECT_EQ(v5->recordEventState(nullptr, kNcclKernelChStop, nullptr), ncclSuccess);
  EXPECT_EQ(v5->finalize(nullptr), ncclSuccess);

  auto* v4 = static_cast<const xpu_nccl_profiler_v4_t*>(dlsym(handle_, "ncclProfiler_v4"));
  ASSERT_NE(v4, nullptr);
  ctx = reinterpret_cast<void*>(0x1);
  EXPECT_NE(v4->init(&ctx, &mask, "comm", 1234, 1, 4, 0, nullptr), ncclSuccess);
  EXPECT_EQ(ctx, nullptr);
}

}  // namespace
