// python/src/native_module.cc — the optional compiled module
// xputimer._xputimer_native: hook control through the C API (resolved with
// dlsym(RTLD_DEFAULT) at first use, so the module never links against the
// hook and works, as a no-op, without it) and a ring-file reader for
// notebooks (ring_reader.h) whose output equals xputimer/ring.py.
//
// Thread-safety: the C API is thread-safe; symbol resolution is a magic
// static. Ring reading releases nothing (it is quick and holds no locks).
#include <dlfcn.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "ring_reader.h"
#include "xpu/hook_api.h"

namespace py = pybind11;

namespace xpu::python {
namespace {

struct HookApi {
  int (*is_enabled)() = nullptr;
  int (*set_enabled)(int) = nullptr;
  uint64_t (*now_ns)() = nullptr;
  uint32_t (*intern)(uint32_t, const char*, uint32_t, int32_t) = nullptr;
  int (*emit)(uint32_t, uint64_t, uint64_t, uint32_t, uint32_t) = nullptr;
  int (*mark_step)(uint64_t, uint64_t, uint64_t) = nullptr;

  HookApi() {
    is_enabled = reinterpret_cast<decltype(is_enabled)>(dlsym(RTLD_DEFAULT, "xpu_is_enabled"));
    set_enabled = reinterpret_cast<decltype(set_enabled)>(dlsym(RTLD_DEFAULT, "xpu_set_enabled"));
    now_ns = reinterpret_cast<decltype(now_ns)>(dlsym(RTLD_DEFAULT, "xpu_now_ns"));
    intern = reinterpret_cast<decltype(intern)>(dlsym(RTLD_DEFAULT, "xpu_intern_host_signature"));
    emit = reinterpret_cast<decltype(emit)>(dlsym(RTLD_DEFAULT, "xpu_emit_host_event"));
    mark_step = reinterpret_cast<decltype(mark_step)>(dlsym(RTLD_DEFAULT, "xpu_mark_step"));
  }
};

const HookApi& Api() {
  static const HookApi api;
  return api;
}

uint64_t NowNs() {
  if (Api().now_ns != nullptr) return Api().now_ns();
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

// Region annotation: one XPU_OP_ANNOTATION host event spanning the block.
class Annotation {
 public:
  explicit Annotation(const std::string& name, uint32_t value) : value_(value) {
    if (Api().intern != nullptr)
      sig_ = Api().intern(XPU_OP_ANNOTATION, name.data(), static_cast<uint32_t>(name.size()), 0);
  }
  Annotation& Enter() {
    start_ = NowNs();
    return *this;
  }
  bool Exit(const py::object& exc_type, const py::object&, const py::object&) {
    if (sig_ != 0 && Api().emit != nullptr)
      Api().emit(sig_, start_, NowNs(), value_,
                 exc_type.is_none() ? 0u : static_cast<uint32_t>(XPU_REC_CALL_FAILED));
    return false;
  }
  uint32_t sig_id() const { return sig_; }

 private:
  uint32_t sig_ = 0;
  uint32_t value_ = 0;
  uint64_t start_ = 0;
};

py::str Utf8(const std::string& s) {
  // Names come from untrusted bytes: decode like Python's errors="replace".
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

std::string CStr(const char* p, size_t cap) {
  size_t n = 0;
  while (n < cap && p[n] != '\0') ++n;
  return std::string(p, n);
}

RingSnapshot ReadOrThrow(const std::string& path) {
  RingSnapshot s = ReadRingFile(path);
  if (!s.ok) throw py::value_error(s.error);
  return s;
}

py::dict ReadRing(const std::string& path) {
  const RingSnapshot s = ReadOrThrow(path);
  const xpu_ring_header_v1& h = s.header;
  py::dict header;
  header["abi_version"] = h.abi_version;
  header["ring_capacity"] = h.ring_capacity;
  header["sig_capacity"] = h.sig_capacity;
  header["str_capacity"] = h.str_capacity;
  header["file_size"] = h.file_size;
  header["pid"] = h.pid;
  header["rank"] = h.rank;
  header["local_rank"] = h.local_rank;
  header["world_size"] = h.world_size;
  header["local_world_size"] = h.local_world_size;
  header["device"] = h.device;
  header["created_ns"] = h.created_ns;
  header["start_time_ticks"] = h.start_time_ticks;
  header["job"] = Utf8(CStr(h.job, sizeof(h.job)));
  header["host"] = Utf8(CStr(h.host, sizeof(h.host)));
  header["job_name"] = Utf8(CStr(h.job_name, sizeof(h.job_name)));
  header["write_index"] = h.write_index;
  header["read_index"] = h.read_index;
  header["sig_count"] = h.sig_count;
  header["str_used"] = h.str_used;
  header["heartbeat_ns"] = h.heartbeat_ns;
  header["producer_state"] = h.producer_state;
  header["timing_policy"] = h.timing_policy;
  py::list counters;
  for (uint64_t c : h.counters) counters.append(c);
  header["counters"] = counters;

  py::dict sigs;
  for (const auto& [id, e] : s.signatures) {
    const xpu_signature_v1& g = e.raw;
    py::dict d;
    d["kind"] = g.kind;
    d["name"] = Utf8(e.name);
    d["dtype"] = g.dtype;
    d["gemm_flags"] = g.gemm_flags;
    d["m"] = g.m;
    d["n"] = g.n;
    d["k"] = g.k;
    d["batch"] = g.batch;
    d["count"] = g.count;
    d["comm_id"] = g.comm_id;
    d["comm_rank"] = g.comm_rank;
    d["comm_nranks"] = g.comm_nranks;
    d["peer"] = g.peer;
    d["device"] = g.device;
    d["out_dtype"] = g.out_dtype;
    d["compute_type"] = g.compute_type;
    sigs[py::int_(id)] = d;
  }
  py::list records;
  for (const RecordEntry& r : s.records) {
    py::dict d;
    d["pos"] = r.pos;
    d["sig_id"] = r.raw.sig_id;
    d["start_ns"] = r.raw.start_ns;
    d["duration_ns"] = r.duration_ns;
    d["issue_latency_ns"] = r.raw.issue_latency_ns;
    d["seq"] = r.raw.seq;
    d["stream"] = r.raw.stream;
    d["flags"] = r.raw.flags;
    records.append(d);
  }
  py::dict errors;
  errors["uncommitted"] = s.errors.uncommitted;
  errors["bad_sig_id"] = s.errors.bad_sig_id;
  errors["bad_sig_entry"] = s.errors.bad_sig_entry;
  errors["bad_name"] = s.errors.bad_name;
  py::dict out;
  out["header"] = header;
  out["signatures"] = sigs;
  out["records"] = records;
  out["errors"] = errors;
  return out;
}

py::list RingStats(const std::string& path) {
  const RingSnapshot s = ReadOrThrow(path);
  py::list out;
  for (const SignatureStats& st : ComputeStats(s)) {
    py::dict d;
    d["sig_id"] = st.sig_id;
    d["name"] = Utf8(st.name);
    d["kind"] = st.kind;
    d["count"] = st.count;
    d["median_ns"] = st.median_ns;
    d["total_ns"] = st.total_ns;
    d["tflops"] = st.has_tflops ? py::object(py::float_(st.tflops)) : py::object(py::none());
    d["busbw_gbps"] = st.has_busbw ? py::object(py::float_(st.busbw_gbps)) : py::object(py::none());
    out.append(d);
  }
  return out;
}

// emit(sig_id, start_ns, end_ns, value, flags) -> bool, as a METH_FASTCALL
// builtin: the per-call cost of the Python wrappers is dominated by the
// call into the hook, and a raw builtin is ~10x cheaper than ctypes.
PyObject* EmitFast(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 5) {
    PyErr_SetString(PyExc_TypeError, "emit(sig_id, start_ns, end_ns, value, flags)");
    return nullptr;
  }
  unsigned long long v[5];
  for (int i = 0; i < 5; ++i) {
    v[i] = PyLong_AsUnsignedLongLong(args[i]);
    if (v[i] == static_cast<unsigned long long>(-1) && PyErr_Occurred()) return nullptr;
  }
  const auto emit = Api().emit;
  if (emit == nullptr || v[0] > UINT32_MAX) Py_RETURN_FALSE;
  const uint32_t value = v[3] > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(v[3]);
  if (emit(static_cast<uint32_t>(v[0]), v[1], v[2], value, static_cast<uint32_t>(v[4])) == 0)
    Py_RETURN_TRUE;
  Py_RETURN_FALSE;
}

PyMethodDef kEmitDef = {
    "emit", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(EmitFast)), METH_FASTCALL,
    "emit(sig_id, start_ns, end_ns, value, flags) -> bool: one host event"};

}  // namespace
}  // namespace xpu::python

PYBIND11_MODULE(_xputimer_native, m) {
  using namespace xpu::python;
  m.doc() = "XPUTimer native helpers: hook control and ring-file reader";
  m.def(
      "available", [] { return Api().emit != nullptr && Api().intern != nullptr; },
      "True when libxpu_hook.so's C API is present in this process");
  m.def("enabled", [] { return Api().is_enabled != nullptr && Api().is_enabled() != 0; });
  m.def(
      "set_enabled",
      [](bool on) { return Api().set_enabled != nullptr && Api().set_enabled(on ? 1 : 0) != 0; },
      py::arg("enabled"), "Turns tracing on/off; returns the previous state");
  m.def("enable", [] { return Api().set_enabled != nullptr && Api().set_enabled(1) != 0; });
  m.def("disable", [] { return Api().set_enabled != nullptr && Api().set_enabled(0) != 0; });
  PyObject* emit_fn = PyCFunction_New(&kEmitDef, nullptr);
  if (emit_fn == nullptr) throw py::error_already_set();
  m.attr("emit") = py::reinterpret_steal<py::object>(emit_fn);
  m.def("now_ns", &NowNs, "Host clock of the records (CLOCK_REALTIME ns)");
  m.def(
      "mark_step",
      [](uint64_t step, uint64_t start_ns, uint64_t end_ns) {
        return Api().mark_step != nullptr && Api().mark_step(step, start_ns, end_ns) == 0;
      },
      py::arg("step"), py::arg("start_ns"), py::arg("end_ns"));
  py::class_<Annotation>(m, "annotate", "Context manager: one XPU_OP_ANNOTATION event per block")
      .def(py::init<const std::string&, uint32_t>(), py::arg("name"), py::arg("value") = 0)
      .def("__enter__", &Annotation::Enter, py::return_value_policy::reference_internal)
      .def("__exit__", &Annotation::Exit)
      .def_property_readonly("sig_id", &Annotation::sig_id);
  m.def("read_ring", &ReadRing, py::arg("path"),
        "Records, signatures, header and error counts of a ring file (as xputimer.ring.read_ring)");
  m.def("ring_stats", &RingStats, py::arg("path"),
        "Per-signature count, median, TFLOPS (GEMM), busbw (collectives)");
}
