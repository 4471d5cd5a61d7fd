#include "common/metrics/process_collector.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace xpu::metrics {
namespace {

std::string ReadWhole(const char* path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

prometheus::MetricFamily One(const std::string& name, const std::string& help,
                             prometheus::MetricType type, double value) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(std::move(m));
  return f;
}

// Seconds since the epoch at boot, from /proc/stat's btime; 0 if unknown.
double BootTimeS() {
  std::istringstream in(ReadWhole("/proc/stat"));
  std::string key;
  double v = 0;
  while (in >> key) {
    if (key == "btime" && (in >> v)) return v;
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

int OpenFds() {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n - 1;  // the descriptor of the listing itself
}

}  // namespace

bool ParseProcStat(const std::string& text, ProcStat* out) {
  // The command name (field 2) may hold spaces and parentheses: fields after
  // it start past the last ')'.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream in(text.substr(close + 1));
  std::vector<std::string> f;  // f[0] is field 3 (state)
  std::string tok;
  while (in >> tok) f.push_back(tok);
  // Fields used: 14 utime, 15 stime, 22 starttime, 23 vsize, 24 rss.
  if (f.size() < 22) return false;
  char* end = nullptr;
  auto num = [&](size_t field, double* v) {
    const std::string& s = f[field - 3];
    *v = std::strtod(s.c_str(), &end);
    return end != s.c_str();
  };
  return num(14, &out->utime_ticks) && num(15, &out->stime_ticks) &&
         num(22, &out->starttime_ticks) && num(23, &out->vsize_bytes) && num(24, &out->rss_pages);
}

ProcessCollector::ProcessCollector(std::string component, std::string version)
    : component_(std::move(component)), version_(std::move(version)) {}

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  prometheus::MetricFamily build = One("xpu_build_info",
                                       "Always 1; the labels name the program and its version",
                                       MetricType::Gauge, 1);
  build.metric[0].label = {{"component", component_}, {"version", version_}};
  out.push_back(std::move(build));

  ProcStat st;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  if (tick > 0 && ParseProcStat(ReadWhole("/proc/self/stat"), &st)) {
    out.push_back(One("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
                      MetricType::Counter, (st.utime_ticks + st.stime_ticks) / tick));
    out.push_back(One("process_resident_memory_bytes", "Resident memory size in bytes.",
                      MetricType::Gauge, st.rss_pages * page));
    out.push_back(One("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                      MetricType::Gauge, st.vsize_bytes));
    if (const double boot = BootTimeS(); boot > 0) {
      out.push_back(One("process_start_time_seconds",
                        "Start time of the process since unix epoch in seconds.", MetricType::Gauge,
                        boot + st.starttime_ticks / tick));
    }
  }
  rlimit lim{};
  if (getrlimit(RLIMIT_AS, &lim) == 0) {
    out.push_back(One("process_virtual_memory_max_bytes",
                      "Maximum amount of virtual memory available in bytes.", MetricType::Gauge,
                      lim.rlim_cur == RLIM_INFINITY ? -1.0 : static_cast<double>(lim.rlim_cur)));
  }
  if (const int fds = OpenFds(); fds >= 0) {
    out.push_back(
        One("process_open_fds", "Number of open file descriptors.", MetricType::Gauge, fds));
  }
  if (getrlimit(RLIMIT_NOFILE, &lim) == 0) {
    out.push_back(One("process_max_fds", "Maximum number of open file descriptors.",
                      MetricType::Gauge,
                      lim.rlim_cur == RLIM_INFINITY ? -1.0 : static_cast<double>(lim.rlim_cur)));
  }
  return out;
}

}  // namespace xpu::metrics
