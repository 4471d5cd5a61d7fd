// tests/fake_train/fake_train.cc — xpu-fake-train, a small multi-rank
// "training" program for the GPU-less test runtime (tests/fake_runtime). It
// issues the CUDA/cuBLAS/cuBLASLt/NCCL call mix of a data-parallel
// transformer step, so that the hook, the daemon and the engine can be tested
// end to end without a GPU, with op counts that tests can predict exactly
// (--print-plan).
//
// One step, with L = --layers, H = --hidden, T = --tokens, F = --ffn (FFN
// width, default 4H), W = WORLD_SIZE:
//   forward, per layer, on the compute stream:
//     cudaLaunchKernel xpu_fake_kernel (layernorm, --kernel-us)
//     cublasGemmEx QKV            m=3H n=T k=H   (bf16, fp32 compute)
//     cudaLaunchKernel fake_softmax_kernel        (XPU_FAKE_KERNEL_NS)
//     MLP up: cublasLtMatmul with --use-lt, else cublasGemmEx  m=F n=T k=H
//     cudaLaunchKernel fake_gelu_kernel           (XPU_FAKE_KERNEL_NS)
//     cuLaunchKernel xpu_fake_kernel (bias add, --kernel-us)
//     __cudaLaunchKernel fake_dropout_kernel (XPU_FAKE_KERNEL_NS): the entry
//       point of CUDA 13 nvcc-generated launch stubs
//     cudaStreamSynchronize with --sync-every-layer
//   backward, per layer (last layer first):
//     cublasGemmEx dgrad m=H n=T k=F; cublasGemmEx wgrad m=F n=H k=T
//     cublasGemmStridedBatchedEx attention m=T n=T k=H/8 batch=8
//     cudaLaunchKernel xpu_fake_kernel (dropout backward)
//     cudaEventRecord(grad_ready[l], compute); cudaStreamWaitEvent(comm, ...)
//     ncclAllReduce of the layer's gradient, 7*H*H bf16, on the comm stream
//   once per step, on the comm stream:
//     ncclAllGather sendcount H*H bf16; ncclReduceScatter recvcount H*H bf16
//     ncclGroupStart; ncclSend T*H bf16 to (rank+1)%W; ncclRecv from
//     (rank-1+W)%W; ncclGroupEnd
//     cudaEventRecord(join, comm); cudaStreamWaitEvent(compute, join)
//   cudaLaunchKernel xpu_fake_kernel (optimizer step) on the compute stream;
//   cudaStreamSynchronize(compute); print "step <i> time_ms <ms>".
//
// Environment: RANK, WORLD_SIZE, LOCAL_RANK (defaults 0, 1, RANK);
// XPU_FAKE_NCCL_ID_FILE is the default of --nccl-id-file. The device is
// LOCAL_RANK % cudaGetDeviceCount().
//
// Thread-safety: single-threaded program.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/cli/flags.h"
#include "xpu_fake.h"

// Named kernels: distinct host symbols, exported (-rdynamic) so that the
// runtime (and the hook, through cudaFuncGetName) can name them. Distinct
// bodies keep identical-code folding from merging their addresses.
volatile int g_kernel_sink = 0;
extern "C" __attribute__((noinline, used, visibility("default"))) void fake_softmax_kernel() {
  g_kernel_sink = 1;
}
extern "C" __attribute__((noinline, used, visibility("default"))) void fake_gelu_kernel() {
  g_kernel_sink = 2;
}
extern "C" __attribute__((noinline, used, visibility("default"))) void fake_dropout_kernel() {
  g_kernel_sink = 3;
}

// Not in the public headers: what nvcc (CUDA 13) host stubs call.
extern "C" cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** args,
                                          size_t shmem, cudaStream_t stream);

namespace {

constexpr int kHeads = 8;

struct Options {
  int steps = 10;
  int layers = 2;
  int hidden = 1024;
  int tokens = 1024;
  int ffn = 0;  // 0: 4 * hidden
  int step_sleep_ms = 0;
  int kernel_us = 50;
  std::string nccl_id_file;
  bool use_lt = false;
  bool sync_every_layer = false;
  int gc_stall_ms = 0;
  int extra_collective_at = -1;
  int hang_at = -1;
  double hang_after_s = -1;
  int exit_at = -1;
  int spin_at = -1;
  int checkpoint_at = -1;
  int checkpoint_ms = 60000;
  int fault_rank = -1;  // -1: fault options apply to every rank
  bool print_plan = false;
};

// The command line; returns -1 to go on, else the exit code.
int Parse(int argc, char** argv, Options* o) {
  CLI::App app("xpu-fake-train: a multi-rank training loop on the GPU-less test runtime.");
  xpu::flags::Configure(app, "xpu-fake-train");
  app.add_option("--steps", o->steps, "training steps")->type_name("N");
  app.add_option("--layers", o->layers, "layers")->type_name("L");
  app.add_option("--hidden", o->hidden, "hidden size (multiple of 8)")->type_name("H");
  app.add_option("--tokens", o->tokens, "tokens per micro-batch")->type_name("T");
  app.add_option("--ffn", o->ffn,
                 "FFN width of the MLP GEMMs (default 4 x hidden); a width that is not a "
                 "multiple of 64 is an un-optimized shape, slower on the fake runtime by "
                 "XPU_FAKE_MISALIGNED_FACTOR")
      ->type_name("F");
  app.add_option("--kernel-us", o->kernel_us, "duration of xpu_fake_kernel launches")
      ->type_name("US");
  app.add_option("--step-sleep-ms", o->step_sleep_ms, "host sleep between steps, e.g. data loading")
      ->type_name("MS");
  app.add_option("--nccl-id-file", o->nccl_id_file,
                 "rank 0 writes the NCCL unique id there, others read it (default "
                 "$XPU_FAKE_NCCL_ID_FILE; needed when WORLD_SIZE > 1)")
      ->type_name("PATH");
  app.add_flag("--use-lt", o->use_lt, "MLP-up GEMM through cublasLtMatmul instead of cublasGemmEx");
  app.add_flag("--sync-every-layer", o->sync_every_layer,
               "cudaStreamSynchronize after each forward layer");
  const std::string faults = "Faults (on the fault ranks; steps are numbered from 0)";
  app.add_option("--gc-stall-ms", o->gc_stall_ms, "host stall in every step's forward pass")
      ->type_name("MS")
      ->group(faults);
  app.add_option("--extra-collective-at", o->extra_collective_at,
                 "one extra ncclAllReduce in step S")
      ->type_name("S")
      ->group(faults);
  app.add_option("--hang-at", o->hang_at, "stop issuing work at the start of step S, forever")
      ->type_name("S")
      ->group(faults);
  app.add_option("--hang-after-s", o->hang_after_s,
                 "stop issuing work at the start of the first step after SEC seconds, forever")
      ->type_name("SEC")
      ->group(faults);
  app.add_option("--exit-at", o->exit_at, "exit with status 3 at the start of step S")
      ->type_name("S")
      ->group(faults);
  app.add_option("--spin-at", o->spin_at, "spin forever in native code at the start of step S")
      ->type_name("S")
      ->group(faults);
  app.add_option("--checkpoint-at", o->checkpoint_at,
                 "save a \"checkpoint\" (host sleep of --checkpoint-ms inside a checkpoint host "
                 "event) at the start of step S")
      ->type_name("S")
      ->group(faults);
  app.add_option("--checkpoint-ms", o->checkpoint_ms, "checkpoint duration")
      ->type_name("MS")
      ->group(faults);
  app.add_option("--fault-rank", o->fault_rank,
                 "the fault options apply to RANK R only (-1: every rank)")
      ->type_name("R")
      ->group(faults);
  app.add_flag("--print-plan", o->print_plan, "print the per-step op counts and exit");
  if (int rc = xpu::flags::ParseMain(app, argc, argv, 1); rc >= 0) return rc;
  if (o->steps < 0 || o->layers < 1 || o->hidden < kHeads || o->hidden % kHeads != 0 ||
      o->tokens < 1 || o->kernel_us < 0 || o->ffn < 0) {
    fprintf(stderr, "xpu-fake-train: invalid sizes\n");
    return 1;
  }
  if (o->ffn == 0) o->ffn = 4 * o->hidden;
  return -1;
}

// Per-step op counts; keep in sync with Step() below (the test
// fake_train_plan checks the plan against the hook-free run's own counters).
void PrintPlan(const Options& o) {
  int L = o.layers;
  printf("plan steps %d\n", o.steps);
  printf("plan per_step cudaLaunchKernel %d\n", 3 * L + L + 1);
  printf("plan per_step cuLaunchKernel %d\n", L);
  printf("plan per_step __cudaLaunchKernel %d\n", L);
  printf("plan per_step cublasGemmEx %d\n", L * (o.use_lt ? 1 : 2) + 2 * L);
  printf("plan per_step cublasLtMatmul %d\n", o.use_lt ? L : 0);
  printf("plan per_step cublasGemmStridedBatchedEx %d\n", L);
  printf("plan per_step ncclAllReduce %d\n", L);
  printf("plan per_step ncclAllGather 1\n");
  printf("plan per_step ncclReduceScatter 1\n");
  printf("plan per_step ncclSend 1\n");
  printf("plan per_step ncclRecv 1\n");
  printf("plan per_step ncclGroupStart 1\n");
  printf("plan per_step cudaEventRecord %d\n", L + 1);
  printf("plan per_step cudaStreamWaitEvent %d\n", L + 1);
  printf("plan per_step cudaStreamSynchronize %d\n", 1 + (o.sync_every_layer ? L : 0));
  if (o.extra_collective_at >= 0) {
    printf("plan extra ncclAllReduce step %d ranks %d\n", o.extra_collective_at, o.fault_rank);
  }
  printf("plan gemm qkv m=%d n=%d k=%d batch=1\n", 3 * o.hidden, o.tokens, o.hidden);
  printf("plan gemm mlp_up m=%d n=%d k=%d batch=1 api=%s\n", o.ffn, o.tokens, o.hidden,
         o.use_lt ? "cublasLtMatmul" : "cublasGemmEx");
  printf("plan gemm dgrad m=%d n=%d k=%d batch=1\n", o.hidden, o.tokens, o.ffn);
  printf("plan gemm wgrad m=%d n=%d k=%d batch=1\n", o.ffn, o.hidden, o.tokens);
  printf("plan gemm attn m=%d n=%d k=%d batch=%d\n", o.tokens, o.tokens, o.hidden / kHeads, kHeads);
  printf("plan coll allreduce count=%lld dtype=bf16\n", 7LL * o.hidden * o.hidden);
  printf("plan coll allgather count=%lld dtype=bf16\n", 1LL * o.hidden * o.hidden);
  printf("plan coll reducescatter count=%lld dtype=bf16\n", 1LL * o.hidden * o.hidden);
  printf("plan coll sendrecv count=%lld dtype=bf16\n", 1LL * o.tokens * o.hidden);
}

int EnvInt(const char* name, int def) {
  const char* v = getenv(name);
  return v && *v ? atoi(v) : def;
}

#define CHECK_CUDA(x)                                                                 \
  do {                                                                                \
    cudaError_t e_ = (x);                                                             \
    if (e_ != cudaSuccess) {                                                          \
      fprintf(stderr, "xpu-fake-train: %s failed: %s\n", #x, cudaGetErrorString(e_)); \
      exit(2);                                                                        \
    }                                                                                 \
  } while (0)
#define CHECK_CU(x)                                                                 \
  do {                                                                              \
    CUresult e_ = (x);                                                              \
    if (e_ != CUDA_SUCCESS) {                                                       \
      fprintf(stderr, "xpu-fake-train: %s failed: %d\n", #x, static_cast<int>(e_)); \
      exit(2);                                                                      \
    }                                                                               \
  } while (0)
#define CHECK_BLAS(x)                                                               \
  do {                                                                              \
    cublasStatus_t e_ = (x);                                                        \
    if (e_ != CUBLAS_STATUS_SUCCESS) {                                              \
      fprintf(stderr, "xpu-fake-train: %s failed: %d\n", #x, static_cast<int>(e_)); \
      exit(2);                                                                      \
    }                                                                               \
  } while (0)
#define CHECK_NCCL(x)                                                                 \
  do {                                                                                \
    ncclResult_t e_ = (x);                                                            \
    if (e_ != ncclSuccess) {                                                          \
      fprintf(stderr, "xpu-fake-train: %s failed: %s\n", #x, ncclGetErrorString(e_)); \
      exit(2);                                                                        \
    }                                                                                 \
  } while (0)

std::string ToHex(const ncclUniqueId& id) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s;
  for (char c : id.internal) {
    auto b = static_cast<unsigned char>(c);
    s += kDigits[b >> 4];
    s += kDigits[b & 15];
  }
  return s;
}

bool FromHex(const std::string& s, ncclUniqueId* id) {
  if (s.size() < 2 * sizeof(id->internal)) return false;
  for (size_t i = 0; i < sizeof(id->internal); ++i) {
    unsigned v = 0;
    if (sscanf(s.c_str() + 2 * i, "%2x", &v) != 1) return false;
    id->internal[i] = static_cast<char>(v);
  }
  return true;
}

// Rank 0 creates the id and publishes it atomically (write + rename), so a
// reader never sees a partial file; the others poll for it.
ncclUniqueId ShareId(const std::string& path, int rank, int world) {
  ncclUniqueId id;
  if (rank == 0) {
    CHECK_NCCL(ncclGetUniqueId(&id));
    if (!path.empty()) {
      std::string tmp = path + ".tmp." + std::to_string(getpid());
      FILE* f = fopen(tmp.c_str(), "w");
      if (f == nullptr || fprintf(f, "%s\n", ToHex(id).c_str()) < 0 || fclose(f) != 0 ||
          rename(tmp.c_str(), path.c_str()) != 0) {
        fprintf(stderr, "xpu-fake-train: cannot write %s\n", path.c_str());
        exit(2);
      }
    }
    return id;
  }
  if (path.empty()) {
    fprintf(stderr, "xpu-fake-train: WORLD_SIZE %d needs --nccl-id-file\n", world);
    exit(2);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (;;) {
    FILE* f = fopen(path.c_str(), "r");
    if (f != nullptr) {
      char buf[512] = {};
      size_t n = fread(buf, 1, sizeof(buf) - 1, f);
      fclose(f);
      if (FromHex(std::string(buf, n), &id)) return id;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      fprintf(stderr, "xpu-fake-train: no NCCL id in %s after 120 s\n", path.c_str());
      exit(2);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

struct Runtime {
  int rank = 0, world = 1;
  cudaStream_t compute = nullptr, comm_stream = nullptr;
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t lt_desc = nullptr;
  cublasLtMatrixLayout_t lt_a = nullptr, lt_b = nullptr, lt_c = nullptr;
  CUfunction bias_fn = nullptr;
  cudaKernel_t dropout_kernel = nullptr;
  ncclComm_t nccl = nullptr;
  std::vector<cudaEvent_t> grad_ready;
  cudaEvent_t join = nullptr;
  void* buf = nullptr;  // one scratch buffer stands in for every tensor
  void* grad = nullptr;
};

void LaunchFake(const Options& o, cudaStream_t s) {
  uint64_t ns = static_cast<uint64_t>(o.kernel_us) * 1000;
  void* args[] = {&ns};
  CHECK_CUDA(cudaLaunchKernel(reinterpret_cast<const void*>(&xpu_fake_kernel), dim3(1), dim3(1),
                              args, 0, s));
}

void LaunchNamed(void (*fn)(), cudaStream_t s) {
  CHECK_CUDA(cudaLaunchKernel(reinterpret_cast<const void*>(fn), dim3(1), dim3(1), nullptr, 0, s));
}

void Gemm(Runtime& rt, int m, int n, int k) {
  float alpha = 1, beta = 0;
  CHECK_BLAS(cublasGemmEx(rt.blas, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, rt.buf, CUDA_R_16BF,
                          m, rt.buf, CUDA_R_16BF, k, &beta, rt.buf, CUDA_R_16BF, m,
                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void Setup(const Options& o, Runtime& rt) {
  int ndev = 0;
  CHECK_CUDA(cudaGetDeviceCount(&ndev));
  int local_rank = EnvInt("LOCAL_RANK", rt.rank);
  CHECK_CUDA(cudaSetDevice(local_rank % ndev));
  CHECK_CUDA(cudaStreamCreateWithFlags(&rt.compute, cudaStreamNonBlocking));
  CHECK_CUDA(cudaStreamCreateWithFlags(&rt.comm_stream, cudaStreamNonBlocking));
  CHECK_BLAS(cublasCreate(&rt.blas));
  CHECK_BLAS(cublasSetStream(rt.blas, rt.compute));
  const int H = o.hidden, T = o.tokens, F = o.ffn;
  if (o.use_lt) {
    CHECK_BLAS(cublasLtCreate(&rt.lt));
    CHECK_BLAS(cublasLtMatmulDescCreate(&rt.lt_desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t op = CUBLAS_OP_N;
    CHECK_BLAS(
        cublasLtMatmulDescSetAttribute(rt.lt_desc, CUBLASLT_MATMUL_DESC_TRANSA, &op, sizeof(op)));
    // D[F x T] = A[F x H] * B[H x T]
    CHECK_BLAS(cublasLtMatrixLayoutCreate(&rt.lt_a, CUDA_R_16BF, F, H, F));
    CHECK_BLAS(cublasLtMatrixLayoutCreate(&rt.lt_b, CUDA_R_16BF, H, T, H));
    CHECK_BLAS(cublasLtMatrixLayoutCreate(&rt.lt_c, CUDA_R_16BF, F, T, F));
  }
  cudaFunction_t fn = nullptr;
  CHECK_CUDA(cudaGetFuncBySymbol(&fn, reinterpret_cast<const void*>(&xpu_fake_kernel)));
  rt.bias_fn = reinterpret_cast<CUfunction>(fn);
  CHECK_CUDA(
      cudaGetKernel(&rt.dropout_kernel, reinterpret_cast<const void*>(&fake_dropout_kernel)));
  rt.grad_ready.resize(o.layers);
  for (auto& e : rt.grad_ready) CHECK_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  CHECK_CUDA(cudaEventCreateWithFlags(&rt.join, cudaEventDisableTiming));
  CHECK_CUDA(cudaMalloc(&rt.buf, 1 << 20));
  CHECK_CUDA(cudaMalloc(&rt.grad, 1 << 20));
  CHECK_CUDA(cudaMemset(rt.buf, 0, 1 << 20));
}

bool IsFaultRank(const Options& o, int rank) { return o.fault_rank < 0 || o.fault_rank == rank; }

// --spin-at: a rank stuck in a native busy loop (an endless algorithmic loop).
volatile uint64_t g_spin_sink = 0;
extern "C" __attribute__((noinline, used, visibility("default"))) void fake_spin_forever() {
  for (;;) g_spin_sink = g_spin_sink + 1;
}

// --checkpoint-at: a long host-side save inside an XPU_OP_PY_CHECKPOINT host
// interval, announced through the hook's C API (include/xpu/hook_api.h) as
// the Python package does: a BEGIN record when it starts, END when it ends.
// Without the hook the save is just the sleep.
extern "C" __attribute__((noinline, used, visibility("default"))) void fake_save_checkpoint(
    int ms) {
  using InternFn = uint32_t (*)(uint32_t, const char*, uint32_t, int32_t);
  using EmitFn = int (*)(uint32_t, uint64_t, uint64_t, uint32_t, uint32_t);
  using NowFn = uint64_t (*)();
  auto intern = reinterpret_cast<InternFn>(dlsym(RTLD_DEFAULT, "xpu_intern_host_signature"));
  auto emit = reinterpret_cast<EmitFn>(dlsym(RTLD_DEFAULT, "xpu_emit_host_event"));
  auto now = reinterpret_cast<NowFn>(dlsym(RTLD_DEFAULT, "xpu_now_ns"));
  const char kName[] = "checkpoint.save";
  uint32_t sig = intern && emit && now
                     ? intern(68 /* XPU_OP_PY_CHECKPOINT */, kName, sizeof(kName) - 1, 0)
                     : 0;
  uint64_t t0 = sig ? now() : 0;
  if (sig) emit(sig, t0, t0, 0, 1u << 11 /* XPU_REC_BEGIN */);
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  if (sig) emit(sig, t0, now(), 0, 1u << 12 /* XPU_REC_END */);
}

void Step(const Options& o, Runtime& rt, int step) {
  const int H = o.hidden, T = o.tokens, L = o.layers, F = o.ffn;
  const bool faulty = IsFaultRank(o, rt.rank);
  float alpha = 1, beta = 0;
  for (int l = 0; l < L; ++l) {
    LaunchFake(o, rt.compute);
    Gemm(rt, 3 * H, T, H);
    LaunchNamed(&fake_softmax_kernel, rt.compute);
    if (o.use_lt) {
      CHECK_BLAS(cublasLtMatmul(rt.lt, rt.lt_desc, &alpha, rt.buf, rt.lt_a, rt.buf, rt.lt_b, &beta,
                                rt.buf, rt.lt_c, rt.buf, rt.lt_c, nullptr, nullptr, 0, rt.compute));
    } else {
      Gemm(rt, F, T, H);
    }
    LaunchNamed(&fake_gelu_kernel, rt.compute);
    uint64_t ns = static_cast<uint64_t>(o.kernel_us) * 1000;
    void* params[] = {&ns};
    CHECK_CU(cuLaunchKernel(rt.bias_fn, 1, 1, 1, 1, 1, 1, 0, rt.compute, params, nullptr));
    CHECK_CUDA(__cudaLaunchKernel(rt.dropout_kernel, dim3(1), dim3(1), nullptr, 0, rt.compute));
    if (l == 0 && faulty && o.gc_stall_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(o.gc_stall_ms));
    }
    if (o.sync_every_layer) CHECK_CUDA(cudaStreamSynchronize(rt.compute));
  }
  for (int l = L - 1; l >= 0; --l) {
    Gemm(rt, H, T, F);
    Gemm(rt, F, H, T);
    const int hd = H / kHeads;
    CHECK_BLAS(cublasGemmStridedBatchedEx(
        rt.blas, CUBLAS_OP_T, CUBLAS_OP_N, T, T, hd, &alpha, rt.buf, CUDA_R_16BF, hd, 1LL * T * hd,
        rt.buf, CUDA_R_16BF, hd, 1LL * T * hd, &beta, rt.buf, CUDA_R_16BF, T, 1LL * T * T, kHeads,
        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    LaunchFake(o, rt.compute);
    CHECK_CUDA(cudaEventRecord(rt.grad_ready[l], rt.compute));
    CHECK_CUDA(cudaStreamWaitEvent(rt.comm_stream, rt.grad_ready[l], 0));
    CHECK_NCCL(ncclAllReduce(rt.grad, rt.grad, 7ULL * H * H, ncclBfloat16, ncclSum, rt.nccl,
                             rt.comm_stream));
  }
  if (step == o.extra_collective_at && faulty) {
    CHECK_NCCL(ncclAllReduce(rt.grad, rt.grad, 7ULL * H * H, ncclBfloat16, ncclSum, rt.nccl,
                             rt.comm_stream));
  }
  CHECK_NCCL(ncclAllGather(rt.grad, rt.grad, 1ULL * H * H, ncclBfloat16, rt.nccl, rt.comm_stream));
  CHECK_NCCL(ncclReduceScatter(rt.grad, rt.grad, 1ULL * H * H, ncclBfloat16, ncclSum, rt.nccl,
                               rt.comm_stream));
  CHECK_NCCL(ncclGroupStart());
  CHECK_NCCL(ncclSend(rt.buf, 1ULL * T * H, ncclBfloat16, (rt.rank + 1) % rt.world, rt.nccl,
                      rt.comm_stream));
  CHECK_NCCL(ncclRecv(rt.buf, 1ULL * T * H, ncclBfloat16, (rt.rank - 1 + rt.world) % rt.world,
                      rt.nccl, rt.comm_stream));
  CHECK_NCCL(ncclGroupEnd());
  CHECK_CUDA(cudaEventRecord(rt.join, rt.comm_stream));
  CHECK_CUDA(cudaStreamWaitEvent(rt.compute, rt.join, 0));
  LaunchFake(o, rt.compute);  // optimizer step
  CHECK_CUDA(cudaStreamSynchronize(rt.compute));
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const char* f = getenv("XPU_FAKE_NCCL_ID_FILE")) o.nccl_id_file = f;
  if (int rc = Parse(argc, argv, &o); rc >= 0) return rc;
  if (o.print_plan) {
    PrintPlan(o);
    return 0;
  }
  setvbuf(stdout, nullptr, _IOLBF, 0);
  Runtime rt;
  rt.rank = EnvInt("RANK", 0);
  rt.world = EnvInt("WORLD_SIZE", 1);
  if (rt.world < 1 || rt.rank < 0 || rt.rank >= rt.world) {
    fprintf(stderr, "xpu-fake-train: bad RANK %d / WORLD_SIZE %d\n", rt.rank, rt.world);
    return 1;
  }
  Setup(o, rt);
  ncclUniqueId id = ShareId(o.nccl_id_file, rt.rank, rt.world);
  CHECK_NCCL(ncclCommInitRank(&rt.nccl, rt.world, id, rt.rank));
  printf("rank %d world %d pid %d ready\n", rt.rank, rt.world, static_cast<int>(getpid()));

  const bool faulty = IsFaultRank(o, rt.rank);
  const auto started = std::chrono::steady_clock::now();
  for (int step = 0; step < o.steps; ++step) {
    if (faulty && step == o.exit_at) {
      printf("rank %d exiting at step %d\n", rt.rank, step);
      fflush(stdout);
      _exit(3);  // abrupt, like a crashed rank: no teardown
    }
    if (faulty && step == o.spin_at) {
      printf("rank %d spinning at step %d\n", rt.rank, step);
      fflush(stdout);
      fake_spin_forever();
    }
    if (faulty && step == o.checkpoint_at) {
      printf("rank %d checkpoint at step %d for %d ms\n", rt.rank, step, o.checkpoint_ms);
      fflush(stdout);
      fake_save_checkpoint(o.checkpoint_ms);
    }
    if (faulty && step == o.extra_collective_at) {
      printf("rank %d extra all-reduce at step %d\n", rt.rank, step);
      fflush(stdout);
    }
    if (faulty && o.hang_after_s >= 0 && o.hang_at < 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() >=
            o.hang_after_s) {
      o.hang_at = step;
    }
    if (faulty && step == o.hang_at) {
      printf("rank %d hanging at step %d\n", rt.rank, step);
      fflush(stdout);
      for (;;) pause();
    }
    auto t0 = std::chrono::steady_clock::now();
    Step(o, rt, step);
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    printf("rank %d step %d time_ms %.3f\n", rt.rank, step, ms);
    if (o.step_sleep_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(o.step_sleep_ms));
    }
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_NCCL(ncclCommDestroy(rt.nccl));
  printf("rank %d done %d steps\n", rt.rank, o.steps);
  return 0;
}
