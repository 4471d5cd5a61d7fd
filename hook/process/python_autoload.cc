// hook/process/python_autoload.cc — makes the Python instrumentation load by
// itself.
//
// When a Python interpreter starts under LD_PRELOAD=libxpu_hook.so, it reads
// PYTHONPATH after this constructor has run, so prepending the directory that
// holds our sitecustomize.py is enough: that sitecustomize imports
// xputimer.autoload (guarded, it can never break the program) and then
// chain-loads any sitecustomize it shadows. No change to train.py.
//
// Directory: $XPU_PYTHON_DIR, else <dir of libxpu_hook.so>/../share/xputimer/python
// (both the install layout and the build tree). XPU_PYTHON=off disables it.
// Runs single-threaded in the loader; only getenv/setenv/stat/dladdr.
#include <dlfcn.h>
#include <limits.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace xpu::hook {
namespace {

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// True when `dir` is already one of the entries of the colon-separated list.
bool ListHas(const char* list, const std::string& dir) {
  if (list == nullptr) return false;
  std::string l = std::string(":") + list + ":";
  return l.find(":" + dir + ":") != std::string::npos;
}

std::string AutoloadDir() {
  const char* env = getenv("XPU_PYTHON_DIR");
  if (env != nullptr && *env != '\0') return env;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&AutoloadDir), &info) == 0 || info.dli_fname == nullptr) {
    return "";
  }
  std::string lib = info.dli_fname;
  size_t slash = lib.rfind('/');
  if (slash == std::string::npos) return "";
  char resolved[PATH_MAX];
  std::string dir = lib.substr(0, slash) + "/../share/xputimer/python";
  if (realpath(dir.c_str(), resolved) == nullptr) return "";
  return resolved;
}

__attribute__((constructor)) void PythonAutoloadInit() {
  const char* mode = getenv("XPU_PYTHON");
  if (mode != nullptr && (strcmp(mode, "off") == 0 || strcmp(mode, "0") == 0)) return;
  const char* enable = getenv("XPU_ENABLE");
  if (enable != nullptr && strcmp(enable, "0") == 0) return;
  std::string dir = AutoloadDir();
  if (dir.empty() || !IsFile(dir + "/sitecustomize.py")) return;
  const char* current = getenv("PYTHONPATH");
  if (ListHas(current, dir)) return;
  std::string value = (current != nullptr && *current != '\0') ? dir + ":" + current : dir;
  setenv("PYTHONPATH", value.c_str(), 1);
  if (getenv("XPU_PYTHON_DIR") == nullptr) setenv("XPU_PYTHON_DIR", dir.c_str(), 0);
}

}  // namespace
}  // namespace xpu::hook
