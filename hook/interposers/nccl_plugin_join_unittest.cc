// hook/interposers/nccl_plugin_join_unittest.cc — the NCCL interposer's side of
// the profiler-plugin join (nccl_plugin_join.h, include/xpu/hook_nccl_api.h):
// what a plugin claims from inside the real NCCL call equals what the
// interposer handed the core, grouped ops are claimable by content in any
// order, and with a plugin attached the core is asked for a non-timing event.
// Linked with the interposition layers and the recording fake core
// (fake_core_for_test.h). Thread-safety: single-threaded test.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <cstring>
#include <vector>

#include "hook/interposers/comm_registry.h"
#include "hook/interposers/fake_core_for_test.h"
#include "hook/interposers/nccl_plugin_join.h"
#include "xpu/hook_nccl_api.h"

namespace xpu::hook {
namespace {

namespace fk = ::xpu::hook::fake;

struct FakeComm {
  int rank, nranks;
};
FakeComm* Of(ncclComm_t c) { return reinterpret_cast<FakeComm*>(c); }

// What the "plugin" claimed from inside the real calls, in claim order.
struct Claim {
  int matches;
  xpu_nccl_issued_op_v1 op;
};
std::vector<Claim> g_claims;
// Queries the fake NCCL runs while enqueuing (as NCCL starts coll/p2p events).
std::vector<xpu_nccl_issue_query_v1> g_queries_in_call;

void ClaimAll() {
  for (const xpu_nccl_issue_query_v1& q : g_queries_in_call) {
    Claim c{};
    c.matches = xpu_nccl_claim_issued_op(&q, &c.op);
    g_claims.push_back(c);
  }
}

ncclResult_t FakeInitRank(ncclComm_t* comm, int nranks, ncclUniqueId, int rank) {
  *comm = reinterpret_cast<ncclComm_t>(new FakeComm{rank, nranks});
  return ncclSuccess;
}
ncclResult_t FakeCuDevice(const ncclComm_t, int* d) {
  *d = 0;
  return ncclSuccess;
}
ncclResult_t FakeUserRank(const ncclComm_t c, int* r) {
  *r = Of(c)->rank;
  return ncclSuccess;
}
ncclResult_t FakeCount(const ncclComm_t c, int* n) {
  *n = Of(c)->nranks;
  return ncclSuccess;
}
int g_group_depth = 0;
ncclResult_t FakeAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                           cudaStream_t) {
  if (g_group_depth == 0) ClaimAll();  // implicit group: launched inside the call
  return ncclSuccess;
}
ncclResult_t FakeSend(const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
  return ncclSuccess;
}
ncclResult_t FakeRecv(void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
  return ncclSuccess;
}
ncclResult_t FakeGroupStart() {
  ++g_group_depth;
  return ncclSuccess;
}
ncclResult_t FakeGroupEnd() {
  if (--g_group_depth == 0) ClaimAll();
  return ncclSuccess;
}

const bool kRealsRegistered = [] {
  auto set = [](const char* n, auto fn) { fk::SetReal(n, reinterpret_cast<void*>(fn)); };
  set("ncclCommInitRank", &FakeInitRank);
  set("ncclCommCuDevice", &FakeCuDevice);
  set("ncclCommUserRank", &FakeUserRank);
  set("ncclCommCount", &FakeCount);
  set("ncclAllReduce", &FakeAllReduce);
  set("ncclSend", &FakeSend);
  set("ncclRecv", &FakeRecv);
  set("ncclGroupStart", &FakeGroupStart);
  set("ncclGroupEnd", &FakeGroupEnd);
  return true;
}();

const cudaStream_t kStream = reinterpret_cast<cudaStream_t>(0x7100);

xpu_nccl_issue_query_v1 Query(uint32_t kind, uint64_t bytes, int peer, int rank, int nranks) {
  xpu_nccl_issue_query_v1 q{};
  q.kind = kind;
  q.bytes = bytes;
  q.peer = peer;
  q.rank = rank;
  q.nranks = nranks;
  return q;
}

class NcclPluginJoinTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(kRealsRegistered);
    fk::Reset();
    fk::SetActive(true);
    NcclPluginSetAttachedForTest(false);
    g_claims.clear();
    g_queries_in_call.clear();
    ncclUniqueId id;
    memset(&id, 0x5a, sizeof(id));
    ASSERT_EQ(ncclCommInitRank(&comm_, 4, id, 2), ncclSuccess);
    fk::Reset();
  }
  ncclComm_t comm_ = nullptr;
};

TEST_F(NcclPluginJoinTest, NoRuntimeMeansNoAttach) {
  // This binary has no hook core: the plugin must be told to disable itself.
  EXPECT_EQ(xpu_nccl_plugin_attach(XPU_NCCL_PLUGIN_API_VERSION), 0);
  EXPECT_EQ(xpu_nccl_plugin_attach(XPU_NCCL_PLUGIN_API_VERSION + 1), 0);
  EXPECT_EQ(xpu_nccl_plugin_times_kind(XPU_OP_ALLREDUCE), 0);
}

TEST_F(NcclPluginJoinTest, SingleCallIsClaimableOnlyDuringTheCall) {
  g_queries_in_call = {Query(XPU_OP_ALLREDUCE, 2048, -1, 2, 4)};
  ASSERT_EQ(ncclAllReduce(nullptr, nullptr, 1024, ncclBfloat16, ncclSum, comm_, kStream),
            ncclSuccess);
  const auto begins = fk::Begins();
  ASSERT_EQ(begins.size(), 1u);
  EXPECT_EQ(begins[0].flags, 0);  // no plugin: the core decides the timing
  ASSERT_EQ(g_claims.size(), 1u);
  EXPECT_EQ(g_claims[0].matches, 1);
  EXPECT_EQ(g_claims[0].op.sig_id, begins[0].sig_id);
  EXPECT_EQ(g_claims[0].op.seq, begins[0].seq);
  EXPECT_EQ(g_claims[0].op.comm_id, CommId(comm_));
  EXPECT_NE(g_claims[0].op.launch_ns, 0u);
  // After the call the list is empty.
  xpu_nccl_issued_op_v1 out{};
  xpu_nccl_issue_query_v1 q = Query(XPU_OP_ALLREDUCE, 2048, -1, 2, 4);
  EXPECT_EQ(xpu_nccl_claim_issued_op(&q, &out), 0);
}

TEST_F(NcclPluginJoinTest, AttachedPluginMakesCollectivesNonTiming) {
  NcclPluginSetAttachedForTest(true);
  EXPECT_EQ(xpu_nccl_plugin_times_kind(XPU_OP_ALLREDUCE), 1);
  EXPECT_EQ(xpu_nccl_plugin_times_kind(XPU_OP_SEND), 1);
  EXPECT_EQ(xpu_nccl_plugin_times_kind(XPU_OP_ALLTOALL), 0);  // built from p2p by NCCL
  EXPECT_EQ(xpu_nccl_plugin_times_kind(XPU_OP_GEMM), 0);
  ncclAllReduce(nullptr, nullptr, 8, ncclFloat32, ncclSum, comm_, kStream);
  ncclGroupStart();
  ncclSend(nullptr, 8, ncclFloat32, 1, comm_, kStream);
  ncclGroupEnd();
  const auto begins = fk::Begins();
  ASSERT_EQ(begins.size(), 2u);
  EXPECT_EQ(begins[0].flags, XPU_REC_NOT_TIMED);
  EXPECT_EQ(begins[1].flags, XPU_REC_NOT_TIMED);
}

// NCCL reorders a group's tasks: the plugin claims by content.
TEST_F(NcclPluginJoinTest, GroupedOpsAreClaimedByContentInAnyOrder) {
  g_queries_in_call = {
      Query(XPU_OP_RECV, 200, 3, 2, 4),        // recv from 3 (issued second)
      Query(XPU_OP_ALLREDUCE, 400, -1, 2, 4),  // issued third
      Query(XPU_OP_SEND, 200, 1, 2, 4),        // issued first
      Query(XPU_OP_SEND, 200, 1, 2, 4),        // nothing left to claim
      Query(XPU_OP_RECV, 999, 3, 2, 4),        // wrong size
  };
  ncclGroupStart();
  ncclSend(nullptr, 100, ncclBfloat16, 1, comm_, kStream);
  ncclRecv(nullptr, 100, ncclBfloat16, 3, comm_, kStream);
  ncclAllReduce(nullptr, nullptr, 100, ncclFloat32, ncclSum, comm_, kStream);
  EXPECT_TRUE(g_claims.empty());  // nothing launched before the group ends
  ncclGroupEnd();
  const auto begins = fk::Begins();  // issue order
  ASSERT_EQ(begins.size(), 3u);
  ASSERT_EQ(g_claims.size(), 5u);
  EXPECT_EQ(g_claims[0].matches, 1);
  EXPECT_EQ(g_claims[0].op.sig_id, begins[1].sig_id);
  EXPECT_EQ(g_claims[0].op.seq, begins[1].seq);
  EXPECT_EQ(g_claims[1].op.sig_id, begins[2].sig_id);
  EXPECT_EQ(g_claims[1].op.seq, begins[2].seq);
  EXPECT_EQ(g_claims[2].op.sig_id, begins[0].sig_id);
  EXPECT_EQ(g_claims[2].op.seq, begins[0].seq);
  for (int i = 0; i < 3; ++i) EXPECT_NE(g_claims[i].op.launch_ns, 0u) << i;
  EXPECT_EQ(g_claims[3].matches, 0);
  EXPECT_EQ(g_claims[4].matches, 0);
}

TEST_F(NcclPluginJoinTest, AmbiguousMatchesClaimTheOldestFirst) {
  g_queries_in_call = {Query(XPU_OP_ALLREDUCE, 0, -1, -1, 0),
                       Query(XPU_OP_ALLREDUCE, 0, -1, -1, 0)};
  ncclGroupStart();
  ncclAllReduce(nullptr, nullptr, 4, ncclFloat32, ncclSum, comm_, kStream);
  ncclAllReduce(nullptr, nullptr, 4, ncclFloat32, ncclSum, comm_, kStream);
  ncclGroupEnd();
  const auto begins = fk::Begins();
  ASSERT_EQ(g_claims.size(), 2u);
  EXPECT_EQ(g_claims[0].matches, 2);
  EXPECT_EQ(g_claims[0].op.seq, begins[0].seq);
  EXPECT_EQ(g_claims[1].matches, 1);
  EXPECT_EQ(g_claims[1].op.seq, begins[1].seq);
}

}  // namespace
}  // namespace xpu::hook
