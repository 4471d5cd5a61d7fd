// hook/process/py_frames.cc — see py_frames.h. Reads memory of the calling
// thread's live Python objects only; no CPython call, no allocation.
#include "hook/process/py_frames.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace xpu::hook {
namespace {

template <typename T>
inline T Load(const void* base, uint32_t off) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + off, sizeof(v));
  return v;
}

inline const void* LoadPtr(const void* base, uint32_t off) { return Load<const void*>(base, off); }

constexpr int kFrameOwnedByCStack = 3;  // 3.12+: the interpreter's entry shim frames
constexpr uint32_t kMaxWalk = 1024;     // frames visited at most (a corrupt chain cannot loop)

// Location table of CPython 3.11+ (Objects/locations.md): entries start with
// a byte that has bit 7 set: code = bits 3-6, length = bits 0-2 + 1 code units.
int ScanVarint(const uint8_t*& p, const uint8_t* end) {
  if (p >= end) return 0;
  unsigned read = *p++;
  unsigned val = read & 63;
  unsigned shift = 0;
  while ((read & 64) != 0 && p < end && shift < 30) {
    read = *p++;
    shift += 6;
    val |= (read & 63) << shift;
  }
  return static_cast<int>(val);
}

int ScanSignedVarint(const uint8_t*& p, const uint8_t* end) {
  const unsigned u = static_cast<unsigned>(ScanVarint(p, end));
  return (u & 1) != 0 ? -static_cast<int>(u >> 1) : static_cast<int>(u >> 1);
}

int Addr2Line311(const uint8_t* t, size_t len, int firstlineno, int addr) {
  if (addr < 0) return firstlineno;
  const uint8_t* p = t;
  const uint8_t* end = t + len;
  int line = firstlineno;
  int ar_end = 0;
  while (p < end) {
    const uint8_t b = *p;
    const int code = (b >> 3) & 15;
    int delta = 0;
    if (code == 14 || code == 13) {  // long form, or no columns: signed line delta
      const uint8_t* q = p + 1;
      delta = ScanSignedVarint(q, end);
    } else if (code >= 10 && code <= 12) {  // one-line forms
      delta = code - 10;
    }
    line += delta;
    const int ar_line = (b >> 3) == 0x1f ? -1 : line;
    ar_end += ((b & 7) + 1) * 2;
    if (addr < ar_end) return ar_line;
    do {
      ++p;
    } while (p < end && (*p & 128) == 0);
  }
  return -1;
}

// Line table of CPython 3.10 (Objects/lnotab_notes.txt): (address delta,
// signed line delta) byte pairs; -128 = no line.
int Addr2Line310(const uint8_t* t, size_t len, int firstlineno, int addr) {
  if (addr < 0) return firstlineno;
  const uint8_t* p = t;
  const uint8_t* end = t + len;
  int line = firstlineno;
  int ar_start = -1, ar_end = 0, ar_line = -1;
  auto advance = [&]() -> bool {
    if (p + 2 > end) return false;
    ar_start = ar_end;
    ar_end += p[0];
    const int ld = static_cast<int8_t>(p[1]);
    p += 2;
    if (ld == -128) {
      ar_line = -1;
    } else {
      line += ld;
      ar_line = line;
    }
    return true;
  };
  while (ar_end <= addr) {
    if (!advance()) return -1;
    while (ar_start == ar_end) {
      if (!advance()) return -1;
    }
  }
  return ar_line;
}

void PutUtf8(uint32_t c, char* out, size_t* n) {
  if (c < 0x80) {
    out[(*n)++] = static_cast<char>(c);
  } else if (c < 0x800) {
    out[(*n)++] = static_cast<char>(0xC0 | (c >> 6));
    out[(*n)++] = static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out[(*n)++] = static_cast<char>(0xE0 | (c >> 12));
    out[(*n)++] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out[(*n)++] = static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out[(*n)++] = static_cast<char>(0xF0 | (c >> 18));
    out[(*n)++] = static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out[(*n)++] = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out[(*n)++] = static_cast<char>(0x80 | (c & 0x3F));
  }
}

}  // namespace

bool PyLayoutForVersion(int minor, PyLayout* out) {
  PyLayout l;
  l.minor = minor;
  // Common to 3.10-3.13 (64-bit).
  l.u_length = 16;
  l.u_state = 32;
  l.b_size = 16;
  l.b_sval = 32;
  l.ob_type = 8;
  l.co_filename = 112;
  l.co_name = 120;
  l.co_linetable = 136;
  switch (minor) {
    case 10:
      l.ts_frame = 24;
      l.fr_back = 24;
      l.fr_code = 32;
      l.fr_instr = 96;  // int f_lasti
      l.co_filename = 104;
      l.co_name = 112;
      l.co_firstlineno = 40;
      l.co_linetable = 120;
      l.u_ascii_size = 48;
      l.u_compact_size = 72;
      l.u_utf8_length = 48;
      l.u_utf8 = 56;
      break;
    case 11:
      l.ts_frame = 56;  // cframe
      l.cframe_current = 8;
      l.fr_code = 32;
      l.fr_back = 48;
      l.fr_instr = 56;  // prev_instr
      l.fr_owner = 69;
      l.instr_is_pointer = true;
      l.co_qualname = 128;
      l.co_firstlineno = 72;
      l.co_code_adaptive = 184;
      l.u_ascii_size = 48;
      l.u_compact_size = 72;
      l.u_utf8_length = 48;
      l.u_utf8 = 56;
      break;
    case 12:
      l.ts_frame = 56;  // cframe
      l.cframe_current = 0;
      l.fr_code = 0;
      l.fr_back = 8;
      l.fr_instr = 56;  // prev_instr
      l.fr_owner = 70;
      l.instr_is_pointer = true;
      l.co_qualname = 128;
      l.co_firstlineno = 68;
      l.co_code_adaptive = 192;
      l.u_ascii_size = 40;
      l.u_compact_size = 56;
      l.u_utf8_length = 40;
      l.u_utf8 = 48;
      break;
    case 13:
      l.ts_frame = 72;  // current_frame
      l.fr_code = 0;    // f_executable
      l.fr_back = 8;
      l.fr_instr = 56;  // instr_ptr
      l.fr_owner = 70;
      l.instr_is_pointer = true;
      l.co_qualname = 128;
      l.co_firstlineno = 68;
      l.co_code_adaptive = 200;
      l.u_ascii_size = 40;
      l.u_compact_size = 56;
      l.u_utf8_length = 40;
      l.u_utf8 = 48;
      break;
    default:
      return false;
  }
  *out = l;
  return true;
}

bool PyLayoutMatchesDebugOffsets(const PyLayout& l, const void* py_runtime) {
  if (l.minor < 13) return true;
  if (py_runtime == nullptr) return false;
  const auto* w = static_cast<const uint64_t*>(py_runtime);
  if (std::memcmp(py_runtime, "xdebugpy", 8) != 0) return false;
  // _Py_DebugOffsets of 3.13 (Include/internal/pycore_runtime.h), as 64-bit
  // words: version, free_threaded, runtime_state[3], interpreter_state[13],
  // thread_state[9], interpreter_frame[6], code_object[10], pyobject[2],
  // type_object[4], tuple[3], list[3], dict[3], float[2], long[3], bytes[3],
  // unicode[4].
  if ((w[1] >> 16) != 0x030D || w[2] != 0) return false;  // 3.13, not free-threaded
  const uint64_t ts = 19, fr = 28, co = 34, po = 44, by = 64, un = 67;
  return w[ts + 4] == l.ts_frame && w[fr + 1] == l.fr_back && w[fr + 2] == l.fr_code &&
         w[fr + 3] == l.fr_instr && w[fr + 5] == static_cast<uint64_t>(l.fr_owner) &&
         w[co + 1] == l.co_filename && w[co + 2] == l.co_name &&
         w[co + 3] == static_cast<uint64_t>(l.co_qualname) && w[co + 4] == l.co_linetable &&
         w[co + 5] == l.co_firstlineno && w[co + 9] == l.co_code_adaptive &&
         w[po + 1] == l.ob_type && w[by + 1] == l.b_size && w[by + 2] == l.b_sval &&
         w[un + 1] == l.u_state && w[un + 2] == l.u_length && w[un + 3] == l.u_ascii_size;
}

uint32_t WalkRawFrames(const PyLayout& l, const void* tstate, uint32_t depth, RawFrame* out) {
  if (tstate == nullptr || l.code_type == nullptr) return 0;
  const void* frame = LoadPtr(tstate, l.ts_frame);
  if (l.cframe_current >= 0 && frame != nullptr) {
    frame = LoadPtr(frame, static_cast<uint32_t>(l.cframe_current));
  }
  uint32_t n = 0;
  for (uint32_t visited = 0; frame != nullptr && n < depth && visited < kMaxWalk; ++visited) {
    if (l.fr_owner >= 0 &&
        Load<int8_t>(frame, static_cast<uint32_t>(l.fr_owner)) == kFrameOwnedByCStack &&
        l.minor >= 12) {
      frame = LoadPtr(frame, l.fr_back);
      continue;
    }
    const void* code = LoadPtr(frame, l.fr_code);
    if (code == nullptr || LoadPtr(code, l.ob_type) != l.code_type) break;
    RawFrame& f = out[n++];
    f.code = code;
    if (l.instr_is_pointer) {
      const char* ip = static_cast<const char*>(LoadPtr(frame, l.fr_instr));
      const char* start = static_cast<const char*>(code) + l.co_code_adaptive;
      f.lasti = ip >= start ? static_cast<int32_t>((ip - start) / 2) : -1;
    } else {
      f.lasti = Load<int32_t>(frame, l.fr_instr);
    }
    f.firstlineno = Load<int32_t>(code, l.co_firstlineno);
    f.qualname =
        LoadPtr(code, l.co_qualname >= 0 ? static_cast<uint32_t>(l.co_qualname) : l.co_name);
    f.filename = LoadPtr(code, l.co_filename);
    frame = LoadPtr(frame, l.fr_back);
  }
  return n;
}

namespace {

// Reads `n` bytes at `addr` of this process without faulting: a bad address
// fails the system call (EFAULT) instead. process_vm_readv first; where a
// seccomp policy forbids it, through a pipe (write() from an unreadable
// address fails with EFAULT too).
bool SafeRead(const void* addr, void* out, size_t n) {
  if (addr == nullptr || n > 4096) return false;
  struct iovec local = {out, n};
  struct iovec remote = {const_cast<void*>(addr), n};
  const ssize_t r = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  if (r == static_cast<ssize_t>(n)) return true;
  if (r >= 0 || errno == EFAULT) return false;
  static int fds[2] = {-1, -1};
  if (fds[0] < 0 && pipe2(fds, O_CLOEXEC) != 0) return false;
  if (write(fds[1], addr, n) != static_cast<ssize_t>(n)) return false;
  return read(fds[0], out, n) == static_cast<ssize_t>(n);
}

bool SafePtr(const void* base, uint32_t off, const void** out) {
  return SafeRead(static_cast<const char*>(base) + off, out, sizeof(*out));
}

bool IsType(const void* obj, uint32_t ob_type, const void* type) {
  const void* t = nullptr;
  return obj != nullptr && SafePtr(obj, ob_type, &t) && t == type;
}

}  // namespace

bool ProbeRawFrames(const PyLayout& l, const void* tstate, uint32_t depth, const void* str_type,
                    const void* bytes_type) {
  if (tstate == nullptr || l.code_type == nullptr || str_type == nullptr ||
      bytes_type == nullptr) {
    return false;
  }
  const void* frame = nullptr;
  if (!SafePtr(tstate, l.ts_frame, &frame)) return false;
  if (l.cframe_current >= 0 && frame != nullptr &&
      !SafePtr(frame, static_cast<uint32_t>(l.cframe_current), &frame)) {
    return false;
  }
  uint32_t n = 0;
  for (uint32_t visited = 0; frame != nullptr && n < depth && visited < kMaxWalk; ++visited) {
    int8_t owner = 0;
    if (l.fr_owner >= 0 &&
        !SafeRead(static_cast<const char*>(frame) + l.fr_owner, &owner, sizeof(owner))) {
      return false;
    }
    if (!(l.minor >= 12 && owner == kFrameOwnedByCStack)) {
      const void* code = nullptr;
      if (!SafePtr(frame, l.fr_code, &code) || !IsType(code, l.ob_type, l.code_type)) {
        return false;
      }
      const void *name = nullptr, *file = nullptr, *table = nullptr;
      const uint32_t name_off =
          l.co_qualname >= 0 ? static_cast<uint32_t>(l.co_qualname) : l.co_name;
      int64_t table_len = -1;
      if (!SafePtr(code, name_off, &name) || !IsType(name, l.ob_type, str_type) ||
          !SafePtr(code, l.co_filename, &file) || !IsType(file, l.ob_type, str_type) ||
          !SafePtr(code, l.co_linetable, &table) || !IsType(table, l.ob_type, bytes_type) ||
          !SafeRead(static_cast<const char*>(table) + l.b_size, &table_len, sizeof(table_len)) ||
          table_len < 0 || table_len > (int64_t{1} << 24)) {
        return false;
      }
      ++n;
    }
    if (!SafePtr(frame, l.fr_back, &frame)) return false;
  }
  return n > 0;
}

int RawFrameLine(const PyLayout& l, const RawFrame& f) {
  const void* table = LoadPtr(f.code, l.co_linetable);
  if (table == nullptr) return f.firstlineno;
  const int64_t len = Load<int64_t>(table, l.b_size);
  if (len < 0 || len > (int64_t{1} << 30)) return f.firstlineno;
  const uint8_t* t = static_cast<const uint8_t*>(table) + l.b_sval;
  const int addr = f.lasti < 0 ? -1 : f.lasti * 2;
  return l.minor >= 11 ? Addr2Line311(t, static_cast<size_t>(len), f.firstlineno, addr)
                       : Addr2Line310(t, static_cast<size_t>(len), f.firstlineno, addr);
}

int AppendPyStr(const PyLayout& l, const void* s, char* buf, size_t cap, size_t* len) {
  if (s == nullptr) return 0;
  const uint32_t state = Load<uint32_t>(s, l.u_state);
  const uint32_t kind = (state >> 2) & 7;
  const bool compact = ((state >> 5) & 1) != 0;
  const bool ascii = ((state >> 6) & 1) != 0;
  const int64_t n = Load<int64_t>(s, l.u_length);
  if (!compact || n < 0 || n > (int64_t{1} << 20)) return 0;
  if (ascii) {
    if (static_cast<size_t>(n) > cap - *len) return -1;
    std::memcpy(buf + *len, static_cast<const char*>(s) + l.u_ascii_size, static_cast<size_t>(n));
    *len += static_cast<size_t>(n);
    return 1;
  }
  if (const char* utf8 = static_cast<const char*>(LoadPtr(s, l.u_utf8))) {
    const int64_t m = Load<int64_t>(s, l.u_utf8_length);
    if (m < 0) return 0;
    if (static_cast<size_t>(m) > cap - *len) return -1;
    std::memcpy(buf + *len, utf8, static_cast<size_t>(m));
    *len += static_cast<size_t>(m);
    return 1;
  }
  if (kind != 1 && kind != 2 && kind != 4) return 0;
  const char* data = static_cast<const char*>(s) + l.u_compact_size;
  const size_t start = *len;
  for (int64_t i = 0; i < n; ++i) {
    if (cap - *len < 4) {
      *len = start;
      return -1;
    }
    uint32_t c = 0;
    if (kind == 1) {
      c = static_cast<uint8_t>(data[i]);
    } else if (kind == 2) {
      uint16_t u;
      std::memcpy(&u, data + 2 * i, 2);
      c = u;
    } else {
      std::memcpy(&c, data + 4 * i, 4);
    }
    PutUtf8(c, buf, len);
  }
  return 1;
}

}  // namespace xpu::hook
