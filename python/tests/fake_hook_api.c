/*
 * fake_hook_api.c — test double of the hook's C API (include/xpu/hook_api.h)
 * for the Python unit tests. LD_PRELOAD it instead of libxpu_hook.so: it
 * interposes nothing, it only implements the C API by writing a ring file
 * exactly as ring.h specifies, to $XPU_RING_DIR/xpu-ring-<pid>.bin (no file
 * and every call a no-op when XPU_RING_DIR is unset or XPU_ENABLE=0).
 *
 * Deliberately simple: a mutex serializes producers (the real hook is
 * lock-free); the layout, commit protocol, signature publication, string
 * arena and duration encoding follow the spec so the readers under test see
 * what the real hook writes. XPU_FAKE_RING_CAPACITY (power of two) and
 * XPU_FAKE_SIG_CAPACITY shrink the ring for tests of wrap-around.
 *
 * A forked child (pid differs from the creator) is disabled, like the hook.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "xpu/hook_api.h"
#include "xpu/ring.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static uint8_t* g_base;
static xpu_ring_header_v1* g_hdr;
static pid_t g_pid;
static int g_enabled;
static uint32_t g_next_sig = 1;
static uint32_t g_thread_counter;
static __thread uint32_t t_thread_index;
static uint32_t g_step_sig;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t page_align(uint64_t v) { return (v + 4095u) & ~(uint64_t)4095u; }

static uint32_t env_u32(const char* name, uint32_t dflt) {
  const char* v = getenv(name);
  if (v == NULL || *v == '\0') return dflt;
  unsigned long x = strtoul(v, NULL, 10);
  return x > 0 && x < (1ul << 30) ? (uint32_t)x : dflt;
}

static void copy_cstr(char* dst, size_t cap, const char* src) {
  if (src == NULL) return;
  size_t n = strlen(src);
  if (n >= cap) n = cap - 1;
  memcpy(dst, src, n);
}

static int32_t env_i32(const char* name, int32_t dflt) {
  const char* v = getenv(name);
  return v != NULL && *v != '\0' ? (int32_t)atoi(v) : dflt;
}

__attribute__((constructor)) static void fake_init(void) {
  const char* dir = getenv("XPU_RING_DIR");
  const char* en = getenv("XPU_ENABLE");
  if (dir == NULL || *dir == '\0' || (en != NULL && strcmp(en, "0") == 0)) return;
  uint32_t cap = env_u32("XPU_FAKE_RING_CAPACITY", 1u << 14);
  if (cap & (cap - 1)) cap = 1u << 14;
  uint32_t sig_cap = env_u32("XPU_FAKE_SIG_CAPACITY", 1024);
  uint64_t str_cap = 1u << 16;
  uint64_t ring_off = XPU_RING_HEADER_SIZE;
  uint64_t sig_off = page_align(ring_off + (uint64_t)cap * sizeof(xpu_record_v1));
  uint64_t str_off = page_align(sig_off + (uint64_t)sig_cap * sizeof(xpu_signature_v1));
  uint64_t size = page_align(str_off + str_cap);

  char path[4096];
  snprintf(path, sizeof path, "%s/xpu-ring-%d.bin", dir, (int)getpid());
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return;
  if (ftruncate(fd, (off_t)size) != 0) {
    close(fd);
    return;
  }
  void* m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return;
  g_base = (uint8_t*)m;
  g_hdr = (xpu_ring_header_v1*)m;
  g_hdr->abi_version = XPU_RECORD_ABI_VERSION;
  g_hdr->header_size = XPU_RING_HEADER_SIZE;
  g_hdr->record_size = sizeof(xpu_record_v1);
  g_hdr->signature_size = sizeof(xpu_signature_v1);
  g_hdr->ring_capacity = cap;
  g_hdr->sig_capacity = sig_cap;
  g_hdr->ring_offset = ring_off;
  g_hdr->sig_offset = sig_off;
  g_hdr->str_offset = str_off;
  g_hdr->str_capacity = str_cap;
  g_hdr->file_size = size;
  g_hdr->pid = (int32_t)getpid();
  g_hdr->rank = env_i32("RANK", -1);
  g_hdr->local_rank = env_i32("LOCAL_RANK", -1);
  g_hdr->world_size = env_i32("WORLD_SIZE", 0);
  g_hdr->local_world_size = env_i32("LOCAL_WORLD_SIZE", 0);
  g_hdr->device = -1;
  g_hdr->created_ns = now_ns();
  snprintf(g_hdr->job, sizeof g_hdr->job, "pid-%d@fake", (int)getpid());
  copy_cstr(g_hdr->host, sizeof g_hdr->host, "fake-host");
  copy_cstr(g_hdr->job_name, sizeof g_hdr->job_name, getenv("XPU_JOB_NAME"));
  g_hdr->producer_state = XPU_PRODUCER_ACTIVE;
  __atomic_store_n(&g_hdr->magic, XPU_RING_MAGIC, __ATOMIC_RELEASE);
  g_pid = getpid();
  g_enabled = 1;
}

__attribute__((destructor)) static void fake_fini(void) {
  if (g_hdr != NULL && g_pid == getpid())
    __atomic_store_n(&g_hdr->producer_state, XPU_PRODUCER_EXITED, __ATOMIC_RELEASE);
}

static int active(void) { return g_hdr != NULL && g_enabled && g_pid == getpid(); }

static void count(int c) { __atomic_fetch_add(&g_hdr->counters[c], 1, __ATOMIC_RELAXED); }

int xpu_hook_api_version(void) { return XPU_HOOK_API_VERSION; }
int xpu_is_enabled(void) { return active(); }
int xpu_set_enabled(int enabled) {
  int prev = active();
  if (g_hdr != NULL && g_pid == getpid()) g_enabled = enabled != 0;
  return prev;
}
uint64_t xpu_now_ns(void) { return now_ns(); }

static xpu_signature_v1* sig_at(uint32_t id) {
  return (xpu_signature_v1*)(g_base + g_hdr->sig_offset) + id;
}

static int name_equal(const xpu_signature_v1* s, const char* name, uint32_t len) {
  if (s->name_len != len) return 0;
  if (len <= XPU_SIG_NAME_INLINE) return memcmp(s->name, name, len) == 0;
  return memcmp(g_base + g_hdr->str_offset + s->name_off, name, len) == 0;
}

/* Caller holds g_mu. Dedupes on (kind, name, aux) like the hook. */
static uint32_t intern_locked(const xpu_signature_v1* proto, const char* name, uint32_t len) {
  for (uint32_t i = 1; i < g_next_sig; ++i) {
    xpu_signature_v1* s = sig_at(i);
    if (s->kind == proto->kind && s->peer == proto->peer && s->m == proto->m && s->n == proto->n &&
        s->k == proto->k && s->count == proto->count && s->comm_id == proto->comm_id &&
        s->dtype == proto->dtype && name_equal(s, name, len))
      return i;
  }
  if (g_next_sig >= g_hdr->sig_capacity) {
    count(XPU_CNT_SIG_TABLE_FULL);
    return 0;
  }
  uint32_t id = g_next_sig++;
  xpu_signature_v1* s = sig_at(id);
  *s = *proto;
  s->commit = 0;
  s->name_len = len;
  s->name_off = 0;
  memcpy(s->name, name, len < XPU_SIG_NAME_INLINE ? len : XPU_SIG_NAME_INLINE);
  if (len > XPU_SIG_NAME_INLINE) {
    uint64_t used = g_hdr->str_used;
    if (used + len > g_hdr->str_capacity) {
      count(XPU_CNT_STR_ARENA_FULL);
      s->name_len = XPU_SIG_NAME_INLINE;
    } else {
      memcpy(g_base + g_hdr->str_offset + used, name, len);
      s->name_off = (uint32_t)used;
      __atomic_store_n(&g_hdr->str_used, used + len, __ATOMIC_RELEASE);
    }
  }
  __atomic_store_n(&s->commit, id, __ATOMIC_RELEASE);
  __atomic_store_n(&g_hdr->sig_count, (uint64_t)id + 1, __ATOMIC_RELEASE);
  return id;
}

uint32_t xpu_intern_signature(const xpu_signature_v1* sig, const char* name, uint32_t len) {
  if (!active() || sig == NULL || (name == NULL && len != 0)) return 0;
  pthread_mutex_lock(&g_mu);
  uint32_t id = intern_locked(sig, name, len);
  pthread_mutex_unlock(&g_mu);
  return id;
}

uint32_t xpu_intern_host_signature(uint32_t kind, const char* name, uint32_t len, int32_t aux) {
  if (!active() || (name == NULL && len != 0)) return 0;
  xpu_signature_v1 proto;
  memset(&proto, 0, sizeof proto);
  proto.kind = (uint16_t)kind;
  proto.peer = aux;
  proto.comm_rank = -1;
  proto.device = -1;
  return xpu_intern_signature(&proto, name, len);
}

static uint16_t thread_index(void) {
  if (t_thread_index == 0)
    t_thread_index = __atomic_add_fetch(&g_thread_counter, 1, __ATOMIC_RELAXED);
  return (uint16_t)t_thread_index;
}

static int write_locked(const xpu_record_v1* rec) {
  uint64_t p = g_hdr->write_index;
  uint64_t cap = g_hdr->ring_capacity;
  if (p - __atomic_load_n(&g_hdr->read_index, __ATOMIC_ACQUIRE) >= cap) {
    count(XPU_CNT_DROPPED_FULL);
    return -1;
  }
  __atomic_store_n(&g_hdr->write_index, p + 1, __ATOMIC_RELEASE);
  xpu_record_v1* slot = (xpu_record_v1*)(g_base + g_hdr->ring_offset) + (p & (cap - 1));
  xpu_record_v1 copy = *rec;
  copy.commit = 0;
  memcpy(slot, &copy, sizeof copy);
  __atomic_store_n(&slot->commit, (uint32_t)(p + 1), __ATOMIC_RELEASE);
  count(XPU_CNT_RECORDS_WRITTEN);
  return 0;
}

int xpu_emit_record(const xpu_record_v1* rec) {
  if (!active() || rec == NULL) return -1;
  pthread_mutex_lock(&g_mu);
  int rc = write_locked(rec);
  pthread_mutex_unlock(&g_mu);
  return rc;
}

int xpu_emit_host_event(uint32_t sig_id, uint64_t start_ns, uint64_t end_ns, uint32_t value,
                        uint32_t flags) {
  if (!active() || sig_id == 0 || sig_id >= g_hdr->sig_capacity) return -1;
  xpu_record_v1 r;
  memset(&r, 0, sizeof r);
  r.sig_id = sig_id;
  r.start_ns = start_ns;
  uint64_t d = end_ns > start_ns ? end_ns - start_ns : 0;
  r.flags = (uint16_t)(flags | XPU_REC_HOST);
  if (d > UINT32_MAX) {
    d /= 1000u;
    r.flags |= XPU_REC_DUR_US;
    if (d > UINT32_MAX) {
      d = UINT32_MAX;
      r.flags |= XPU_REC_DUR_SATURATED;
    }
  }
  r.duration = (uint32_t)d;
  r.seq = value;
  r.stream = thread_index();
  pthread_mutex_lock(&g_mu);
  int rc = write_locked(&r);
  if (rc == 0) count(XPU_CNT_PY_EVENTS);
  pthread_mutex_unlock(&g_mu);
  return rc;
}

int xpu_mark_step(uint64_t step, uint64_t start_ns, uint64_t end_ns) {
  if (!active()) return -1;
  if (g_step_sig == 0) g_step_sig = xpu_intern_host_signature(XPU_OP_STEP, "step", 4, 0);
  return xpu_emit_host_event(g_step_sig, start_ns, end_ns, (uint32_t)step, 0);
}

uint32_t xpu_comm_last_seq(const void* comm) {
  (void)comm;
  return 0;
}
uint64_t xpu_comm_id(const void* comm) {
  (void)comm;
  return 0;
}
