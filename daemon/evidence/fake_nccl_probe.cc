// daemon/evidence/fake_nccl_probe.cc — see fake_nccl_probe.h. The segment is
// written by other processes: copied out field by field with atomic loads,
// nranks validated.
#include "daemon/evidence/fake_nccl_probe.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "tests/fake_runtime/fake_nccl_shm.h"

namespace xpu::daemon {

bool FakeNcclProbeEnabled() {
  const char* v = getenv("XPU_EVIDENCE_FAKE_NCCL");
  return v != nullptr && strcmp(v, "1") == 0;
}

std::vector<xpu::v1::IntraKernelProgress> ProbeFakeNccl(int32_t pid, const std::string& shm_dir) {
  std::vector<xpu::v1::IntraKernelProgress> out;
  DIR* d = opendir(shm_dir.c_str());
  if (d == nullptr) return out;
  const char* prefix = XPU_FAKE_NCCL_SHM_PREFIX + 1;  // without the leading '/'
  while (dirent* e = readdir(d)) {
    if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
    std::string path = shm_dir + "/" + e->d_name;
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st;
    if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < sizeof(xpu_fake_nccl_segment)) {
      close(fd);
      continue;
    }
    void* m = mmap(nullptr, sizeof(xpu_fake_nccl_segment), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) continue;
    const auto* seg = static_cast<const xpu_fake_nccl_segment*>(m);
    const uint32_t magic = __atomic_load_n(&seg->header.magic, __ATOMIC_ACQUIRE);
    const int32_t n = __atomic_load_n(&seg->header.nranks, __ATOMIC_RELAXED);
    if (magic == XPU_FAKE_NCCL_MAGIC && n > 0 && n <= XPU_FAKE_NCCL_MAX_RANKS) {
      for (int32_t r = 0; r < n; ++r) {
        const xpu_fake_nccl_slot& s = seg->slots[r];
        if (__atomic_load_n(&s.init_done, __ATOMIC_ACQUIRE) == 0) continue;
        if (__atomic_load_n(&s.pid, __ATOMIC_RELAXED) != pid) continue;
        xpu::v1::IntraKernelProgress p;
        p.set_source("fake-nccl-shm");
        p.set_channel(e->d_name + strlen(prefix));
        p.set_comm_rank(r);
        p.set_comm_nranks(n);
        p.set_arrived_seq(__atomic_load_n(&s.coll_arrived, __ATOMIC_ACQUIRE));
        p.set_completed_seq(__atomic_load_n(&s.coll_completed, __ATOMIC_ACQUIRE));
        p.set_step(__atomic_load_n(&s.coll_step, __ATOMIC_ACQUIRE));
        p.set_steps_total(2ull * static_cast<uint64_t>(n - 1));
        out.push_back(std::move(p));
      }
    }
    munmap(m, sizeof(xpu_fake_nccl_segment));
  }
  closedir(d);
  return out;
}

}  // namespace xpu::daemon
