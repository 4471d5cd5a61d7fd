// tests/fake_runtime/fake_nccl_status.cc — xpu-fake-nccl-status: prints the
// per-rank progress counters of a fake NCCL communicator (fake_nccl_shm.h),
// the GPU-less stand-in for looking at a hung job's NCCL state.
//
// usage: xpu-fake-nccl-status (--id-file PATH | --id HEX)
// Output: one line per rank,
//   rank <r> pid <pid> global_rank <g> device <d> coll_arrived <a> coll_completed <c> coll_step <k>
// and a last line "behind <r>..." listing the ranks whose coll_arrived is
// below the maximum (the ranks the others wait for), or "behind none".
// Exit status: 0, or 1 when the segment does not exist / is not valid.
//
// Thread-safety: single-threaded; the segment is mapped read-only and read
// with acquire loads, never trusted for sizes beyond its fixed layout.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "common/cli/flags.h"
#include "fake_nccl_shm.h"

int main(int argc, char** argv) {
  std::string hex, id_file;
  CLI::App app("xpu-fake-nccl-status: per-rank progress of a fake NCCL communicator.");
  xpu::flags::Configure(app, "xpu-fake-nccl-status");
  auto* id = app.add_option("--id", hex, "the communicator's unique id (hex)")->type_name("HEX");
  auto* file =
      app.add_option("--id-file", id_file, "a file holding the id (hex)")->type_name("PATH");
  id->excludes(file);
  if (int rc = xpu::flags::ParseMain(app, argc, argv, 2); rc >= 0) return rc;
  if (!id_file.empty()) {
    std::ifstream f(id_file);
    f >> hex;
  }
  if (hex.size() < 32) {
    fprintf(stderr, "usage: xpu-fake-nccl-status (--id-file PATH | --id HEX)\n");
    return 2;
  }
  std::string name = XPU_FAKE_NCCL_SHM_PREFIX + hex.substr(0, 32);
  int fd = shm_open(name.c_str(), O_RDONLY, 0);
  if (fd < 0) {
    fprintf(stderr, "xpu-fake-nccl-status: no segment %s\n", name.c_str());
    return 1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(xpu_fake_nccl_segment))) {
    fprintf(stderr, "xpu-fake-nccl-status: %s is too small\n", name.c_str());
    close(fd);
    return 1;
  }
  void* p = mmap(nullptr, sizeof(xpu_fake_nccl_segment), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return 1;
  const auto* seg = static_cast<const xpu_fake_nccl_segment*>(p);
  if (__atomic_load_n(&seg->header.magic, __ATOMIC_ACQUIRE) != XPU_FAKE_NCCL_MAGIC ||
      seg->header.nranks < 1 || seg->header.nranks > XPU_FAKE_NCCL_MAX_RANKS) {
    fprintf(stderr, "xpu-fake-nccl-status: %s is not initialised\n", name.c_str());
    return 1;
  }
  const int n = seg->header.nranks;
  uint64_t max_arrived = 0;
  for (int r = 0; r < n; ++r) {
    max_arrived =
        std::max(max_arrived, __atomic_load_n(&seg->slots[r].coll_arrived, __ATOMIC_ACQUIRE));
  }
  std::string behind;
  for (int r = 0; r < n; ++r) {
    const xpu_fake_nccl_slot& s = seg->slots[r];
    uint64_t arrived = __atomic_load_n(&s.coll_arrived, __ATOMIC_ACQUIRE);
    uint64_t completed = __atomic_load_n(&s.coll_completed, __ATOMIC_ACQUIRE);
    uint64_t step = __atomic_load_n(&s.coll_step, __ATOMIC_ACQUIRE);
    printf(
        "rank %d pid %d global_rank %d device %d coll_arrived %llu coll_completed %llu"
        " coll_step %llu\n",
        r, s.pid, s.global_rank, s.device, static_cast<unsigned long long>(arrived),
        static_cast<unsigned long long>(completed), static_cast<unsigned long long>(step));
    if (arrived < max_arrived) behind += " " + std::to_string(r);
  }
  printf("behind%s\n", behind.empty() ? " none" : behind.c_str());
  return 0;
}
