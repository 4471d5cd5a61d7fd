// tests/e2e_hook/e2e_expect.h — expectations shared by the end-to-end hook
// tests, computed independently of hook/ and include/xpu/formulas.h: dtype
// codes from the CUDA/NCCL enums, nccl-tests sizes and bus factors, the
// sampler's decision, plus the ring checks every test makes.
//
// Thread-safety: plain functions; they report through GoogleTest macros.
#ifndef XPU_TESTS_E2E_HOOK_E2E_EXPECT_H_
#define XPU_TESTS_E2E_HOOK_E2E_EXPECT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ring_file.h"

namespace xpu::e2e {

constexpr uint64_t kMs = 1000 * 1000;
// GPU-to-host mapping uncertainty allowed around the host marks.
constexpr uint64_t kMapSlackNs = 5 * kMs;
// Generous upper slack over the modelled duration (loaded 2-core machine).
constexpr uint64_t kDurSlackNs = 400 * kMs;

uint32_t XpuDtypeOfCuda(int cuda_data_type);
uint32_t XpuComputeOf(int cublas_compute_type);
uint32_t XpuDtypeOfNccl(int nccl_data_type);
uint64_t ElementBytes(uint32_t xpu_dtype);
// Op kind of an API name ("ncclAllReduce", "cudaStreamSynchronize", ...).
uint32_t KindOfApi(const std::string& api);
// nccl-tests "size" in bytes and bus bandwidth factor.
uint64_t NcclSize(uint32_t kind, uint64_t count, uint64_t element_bytes, uint64_t nranks);
double BusFactor(uint32_t kind, double nranks);
// The sampler: the first `first` occurrences, then one in `every`.
bool Sampled(uint64_t occurrence, uint64_t first, uint64_t every);
bool IsGpuKind(uint32_t kind);
uint64_t EndNs(const xpu_record_v1& r);
uint64_t WallNs();

// Environment of a hooked run writing its ring into `ring_dir`.
std::map<std::string, std::string> HookEnv(const std::string& ring_dir, const std::string& timing);
// Loads the ring of `pid` from `dir` and checks what holds for every run
// (clean exit, nothing dropped or corrupt); *ok false if it cannot be read.
RingFile LoadRing(const std::string& dir, int pid, bool* ok);
// Send/recv seqs of the ranks agree: r's n-th send to p is p's n-th recv from r.
void CheckP2pAcrossRanks(const std::vector<RingFile>& rings);

}  // namespace xpu::e2e

#endif  // XPU_TESTS_E2E_HOOK_E2E_EXPECT_H_
