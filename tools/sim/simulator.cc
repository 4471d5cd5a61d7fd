#include "tools/sim/simulator.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/wire/record_codec.h"
#include "tools/sim/engine_process.h"
#include "tools/sim/evidence.h"
#include "tools/sim/host_stream.h"
#include "tools/sim/judge.h"
#include "xpu/ring.h"
#include "xpu/v1/query.grpc.pb.h"

namespace xpu::sim {
namespace {

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

void SleepUntilNs(uint64_t t) {
  const uint64_t now = NowNs();
  if (t > now) std::this_thread::sleep_for(std::chrono::nanoseconds(t - now));
}

std::chrono::steady_clock::time_point SteadyIn(uint64_t ns) {
  return std::chrono::steady_clock::now() + std::chrono::nanoseconds(ns);
}

std::string Mb(double bytes) {
  char buf[32];
  snprintf(buf, sizeof(buf), "%.1f MB", bytes / 1e6);
  return buf;
}

std::string ReadToken(const std::string& path) {
  if (path.empty()) return "";
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return std::string(absl::StripAsciiWhitespace(ss.str()));
}

// A random token in a new private file (0600 in a 0700 directory under /tmp)
// for an engine the sim starts itself; returns the file's path.
absl::StatusOr<std::string> MakeTokenFile(std::string* token) {
  std::ifstream rnd("/dev/urandom", std::ios::binary);
  unsigned char b[24];
  if (!rnd.read(reinterpret_cast<char*>(b), sizeof(b))) {
    return absl::InternalError("cannot read /dev/urandom for the engine's token");
  }
  static const char kHex[] = "0123456789abcdef";
  token->clear();
  for (unsigned char c : b) {
    token->push_back(kHex[c >> 4]);
    token->push_back(kHex[c & 15]);
  }
  char dir[] = "/tmp/xpu-sim-token-XXXXXX";
  if (mkdtemp(dir) == nullptr)
    return absl::InternalError("cannot create a directory for the token");
  const std::string path = std::string(dir) + "/token";
  std::ofstream f(path);
  f << *token << "\n";
  if (!f) return absl::InternalError(absl::StrCat("cannot write ", path));
  chmod(path.c_str(), 0600);
  return path;
}

// Per-window figures for the progress line and the report.
struct WindowStats {
  uint64_t records = 0;
  uint64_t bytes = 0;
  double build_s = 0, send_s = 0;
  bool late = false;
  double engine_cpu_s = 0;  // at the window's start
};

class Simulation {
 public:
  explicit Simulation(const SimOptions& o)
      : o_(o),
        model_(o.model),
        window_ns_(static_cast<uint64_t>(o.window_s * 1e9)),
        floor_ns_(static_cast<uint64_t>(
            (o.hang_floor_s >= 0 ? o.hang_floor_s : std::min(10.0, o.window_s / 2)) * 1e9)),
        sigs_sent_(static_cast<size_t>(o.model.ranks), 0),
        records_read_(static_cast<size_t>(o.model.ranks), 0),
        batch_seq_(static_cast<size_t>(model_.hosts()), 0) {}

  absl::StatusOr<SimReport> Run();

 private:
  absl::Status StartEngine();
  absl::Status Connect();
  void Disconnect();
  // Builds and queues every host's batch of one step (`step` < Slices()),
  // or one with counters only. Returns (records, bytes) queued.
  std::pair<uint64_t, uint64_t> SendAll(bool with_records, size_t step = 0);
  void SendHost(int32_t host, bool with_records, size_t step, uint64_t now, uint64_t* records,
                uint64_t* bytes);
  // Steps with records in this window (the most of any rank).
  size_t Slices() const;
  // Sends the window's steps spread over the window, one step's batches at
  // a time, as daemons flush while a job runs (a job whose progress came
  // once per window would look stalled between); the hook's hang-watch
  // flags go out on time in between. Fills s's records, bytes and send_s.
  void SendWindow(uint64_t start, uint64_t delta, WindowStats* s);
  void FillProcess(int32_t r, uint64_t now, size_t from, size_t to, xpu::v1::ProcessBatch* pb);
  bool WaitIdle(uint64_t deadline_ns);
  void PollDiagnoses();
  // The job's analysed_until_ns from the engine's Jobs (nullopt when not
  // listed or the call failed).
  std::optional<uint64_t> AnalysedUntil();
  // Waits until the engine has analysed the window ending at window_end_ns
  // (or max(2 windows, 60 s) more passed); sets analysis_lag_s_.
  void WaitForAnalysis(uint64_t window_end_ns);
  void PrintProgress(int w, const WindowStats& s);
  SimReport Report();
  json::Json EngineJson();
  // Times `xpu status` and `xpu diagnose --job J` against the engine while
  // it holds the whole job (the answers a person waits for).
  void TimeQueries();

  const SimOptions o_;
  ClusterModel model_;
  std::shared_mutex model_mu_;  // RunWindow exclusive; command answers shared
  const uint64_t window_ns_, floor_ns_;
  std::unique_ptr<EngineProcess> engine_;
  std::string target_, token_;
  std::string token_file_;  // the user's --token-file, or the one made for the embedded engine
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<xpu::v1::Ingest::Stub>> stubs_;
  std::vector<std::unique_ptr<HostStream>> streams_;
  std::unique_ptr<xpu::v1::Query::Stub> query_;
  std::vector<uint8_t> sigs_sent_;
  std::vector<uint64_t> records_read_;
  std::vector<uint64_t> batch_seq_;
  std::map<std::pair<std::string, std::string>, DiagnosisSeen> seen_;
  std::string poll_error_;
  std::vector<WindowStats> stats_;
  uint64_t t0_ = 0;
  uint64_t record_bytes_ = 0;
  uint64_t steps_with_records_ = 0;
  double engine_cpu_end_ = 0;
  ProcessUsage usage_end_;
  uint64_t rss_baseline_ = 0;
  json::Json queries_;
  double analysis_lag_s_ = -1;
  // The job's records that reached the engine after their window was
  // analysed (JobInfo.records_late), as of the last AnalysedUntil; -1 unknown.
  int64_t records_late_ = -1;
};

absl::Status Simulation::StartEngine() {
  token_ = ReadToken(o_.token_file);
  token_file_ = o_.token_file;
  if (o_.engine != "embedded") {
    target_ = o_.engine;
    return absl::OkStatus();
  }
  EngineProcessOptions eo;
  eo.binary = o_.engine_binary.empty() ? FindEngineBinary() : o_.engine_binary;
  eo.window_s = o_.window_s;
  eo.silent_after_s = std::max(30.0, 3 * o_.window_s);
  eo.cpus = o_.engine_cpus;
  eo.extra_args = o_.engine_args;
  // Every engine call needs a credential (docs/security.md): without a token
  // file of the user's, the sim makes one for the engine it starts, and its
  // streams, queries and CLI calls present it.
  if (token_file_.empty()) {
    absl::StatusOr<std::string> made = MakeTokenFile(&token_);
    if (!made.ok()) return made.status();
    token_file_ = *made;
  }
  eo.extra_args.push_back("--token-file");
  eo.extra_args.push_back(token_file_);
  eo.token = token_;
  absl::StatusOr<std::unique_ptr<EngineProcess>> e = EngineProcess::Start(eo);
  if (!e.ok()) return e.status();
  engine_ = *std::move(e);
  target_ = engine_->target();
  rss_baseline_ = engine_->Usage().rss_bytes;
  return absl::OkStatus();
}

absl::Status Simulation::Connect() {
  const int32_t hosts = model_.hosts();
  const int n = std::max(1, std::min(o_.connections, static_cast<int>(hosts)));
  for (int i = 0; i < n; ++i) {
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(256 << 20);
    args.SetMaxReceiveMessageSize(256 << 20);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one TCP connection per channel
    args.SetInt("xpu-sim.connection", i);
    channels_.push_back(
        grpc::CreateCustomChannel(target_, grpc::InsecureChannelCredentials(), args));
    stubs_.push_back(xpu::v1::Ingest::NewStub(channels_.back()));
  }
  query_ = xpu::v1::Query::NewStub(channels_.front());
  for (int32_t h = 0; h < hosts; ++h) {
    const std::string host = model_.HostName(h);
    streams_.push_back(std::make_unique<HostStream>(
        host + ":xpu-sim", host, token_, [this, h](const xpu::v1::Command& c) {
          std::shared_lock<std::shared_mutex> l(model_mu_);
          return AnswerCommand(model_, h, c, NowNs(), floor_ns_);
        }));
    streams_.back()->Start(stubs_[static_cast<size_t>(h % n)].get());
  }
  const auto deadline = SteadyIn(60000000000ull + static_cast<uint64_t>(hosts) * 2000000ull);
  for (int32_t h = 0; h < hosts; ++h) {
    if (!streams_[static_cast<size_t>(h)]->WaitAccepted(deadline)) {
      return absl::UnavailableError(absl::StrCat("host ", model_.HostName(h),
                                                 ": no stream to the engine at ", target_, ": ",
                                                 streams_[static_cast<size_t>(h)]->error()));
    }
  }
  return absl::OkStatus();
}

void Simulation::Disconnect() {
  const auto deadline = SteadyIn(30000000000ull);
  for (auto& s : streams_) s->Finish(deadline);
}

void Simulation::FillProcess(int32_t r, uint64_t now, size_t from, size_t to,
                             xpu::v1::ProcessBatch* pb) {
  pb->set_process_key(static_cast<uint64_t>(model_.Pid(r)));
  model_.FillIdentity(r, pb->mutable_identity());
  if (!sigs_sent_[static_cast<size_t>(r)]) {
    model_.AppendSignatures(r, pb);
    sigs_sent_[static_cast<size_t>(r)] = 1;
  }
  const std::vector<xpu_record_v1>& recs = model_.Records(r);
  if (to > from) {
    const size_t host = static_cast<size_t>(r / o_.model.ranks_per_host);
    if (o_.compact_records && streams_[host]->compact_records()) {
      wire::EncodeCompactRecords(recs.data() + from, to - from, pb->mutable_compact_records());
    } else {
      pb->set_records(reinterpret_cast<const char*>(recs.data() + from),
                      (to - from) * sizeof(xpu_record_v1));
    }
  }
  uint64_t& read = records_read_[static_cast<size_t>(r)];
  read += to - from;
  xpu::v1::ProcessCounters* c = pb->mutable_counters();
  for (int i = 0; i < XPU_CNT_INTERNAL + 1; ++i)
    c->add_hook(i == XPU_CNT_RECORDS_WRITTEN ? read : 0);
  c->set_records_read(read);
  const bool stopped = model_.Role(r) == HangRole::kStopped;
  c->set_heartbeat_ns(stopped ? model_.hang().since_ns : now);
  model_.FillProgress(r, now, floor_ns_, c->mutable_progress());
}

void Simulation::SendHost(int32_t host, bool with_records, size_t step, uint64_t now,
                          uint64_t* records, uint64_t* bytes) {
  const int32_t first = host * o_.model.ranks_per_host;
  const int32_t last = std::min(model_.ranks(), first + o_.model.ranks_per_host);
  xpu::v1::DaemonMessage m;
  xpu::v1::Batch* b = m.mutable_batch();
  b->set_batch_seq(++batch_seq_[static_cast<size_t>(host)]);
  b->set_sent_ns(now);
  uint64_t n = 0;
  for (int32_t r = first; r < last; ++r) {
    size_t from = 0, to = 0;
    const std::vector<uint32_t>& ends = model_.StepEnds(r);
    if (with_records && !ends.empty()) {
      const size_t i = std::min(step, ends.size());
      from = i == 0 ? 0 : ends[i - 1];
      to = i < ends.size() ? ends[i] : from;
    }
    n += to - from;
    FillProcess(r, now, from, to, b->add_processes());
  }
  *records += n;
  if (n > 0) *bytes += m.ByteSizeLong();
  streams_[static_cast<size_t>(host)]->Enqueue(std::move(m), n);
}

size_t Simulation::Slices() const {
  size_t n = 0;
  for (int32_t r = 0; r < model_.ranks(); ++r) n = std::max(n, model_.StepEnds(r).size());
  return n;
}

void Simulation::SendWindow(uint64_t start, uint64_t delta, WindowStats* s) {
  const size_t slices = Slices();
  bool flagged = false;
  // The hook's hang watch raises its flag floor_ns after the stuck
  // collective was issued: the daemons forward it on their next flush.
  auto flag_hang = [&](uint64_t until) {
    const HangState& h = model_.hang();
    const uint64_t at = h.since_ns + floor_ns_ + 100000000ull;
    if (flagged || !h.active || at <= NowNs() || at > until) return;
    flagged = true;
    SleepUntilNs(at);
    SendAll(false);
    if (o_.progress) {
      fprintf(stderr, "xpu-sim: +%.2f s: hang watch flags raised on the stuck collective\n",
              static_cast<double>(NowNs() - t0_) * 1e-9);
    }
  };
  // Once a rank is stuck its peers' last records are all the daemons
  // have left to flush: they go at once, as before the stall.
  const bool burst = model_.hang().active;
  for (size_t i = 0; i < std::max<size_t>(1, slices); ++i) {
    const uint64_t at = start + delta + (burst ? 0 : i * window_ns_ / std::max<size_t>(1, slices));
    flag_hang(at);
    SleepUntilNs(at);
    const auto t = std::chrono::steady_clock::now();
    const auto [recs, bytes] = SendAll(slices > 0, i);
    s->send_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
    s->records += recs;
    s->bytes += bytes;
  }
  const auto t = std::chrono::steady_clock::now();
  s->late = !WaitIdle(start + window_ns_ * 19 / 20);
  s->send_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  flag_hang(start + window_ns_);
}

std::pair<uint64_t, uint64_t> Simulation::SendAll(bool with_records, size_t step) {
  std::shared_lock<std::shared_mutex> l(model_mu_);
  const int32_t hosts = model_.hosts();
  int threads = o_.threads > 0 ? o_.threads : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::max(1, std::min(threads, static_cast<int>(hosts)));
  std::vector<uint64_t> recs(static_cast<size_t>(threads), 0),
      bytes(static_cast<size_t>(threads), 0);
  std::vector<std::thread> pool;
  const uint64_t now = NowNs();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int32_t h = t; h < hosts; h += threads) {
        SendHost(h, with_records, step, now, &recs[static_cast<size_t>(t)],
                 &bytes[static_cast<size_t>(t)]);
      }
    });
  }
  for (std::thread& th : pool) th.join();
  uint64_t r = 0, b = 0;
  for (int t = 0; t < threads; ++t) {
    r += recs[static_cast<size_t>(t)];
    b += bytes[static_cast<size_t>(t)];
  }
  return {r, b};
}

bool Simulation::WaitIdle(uint64_t deadline_ns) {
  const uint64_t now = NowNs();
  const auto deadline = SteadyIn(deadline_ns > now ? deadline_ns - now : 0);
  bool idle = true;
  for (auto& s : streams_) idle = s->WaitIdle(deadline) && idle;
  return idle;
}

void Simulation::PollDiagnoses() {
  grpc::ClientContext ctx;
  if (!token_.empty()) ctx.AddMetadata("x-xpu-token", token_);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  xpu::v1::DiagnosesRequest req;
  req.set_job(o_.model.job);
  req.set_include_resolved(true);
  xpu::v1::DiagnosesReply reply;
  const grpc::Status st = query_->Diagnoses(&ctx, req, &reply);
  if (!st.ok()) {
    if (st.error_code() != grpc::StatusCode::NOT_FOUND) poll_error_ = st.error_message();
    return;
  }
  for (const xpu::v1::DiagnosisInfo& d : reply.diagnoses()) {
    DiagnosisSeen& s = seen_[{d.kind(), d.subject()}];
    if (s.first_seen_ns == 0 || d.first_seen_ns() < s.first_seen_ns)
      s.first_seen_ns = d.first_seen_ns();
    s.kind = d.kind();
    s.subject = d.subject();
    s.team = d.team();
    s.severity = d.severity();
    s.ranks.assign(d.ranks().begin(), d.ranks().end());
    s.hosts = static_cast<size_t>(d.hosts_size());
    s.active = d.active();
    s.evidence = d.evidence().substr(0, 300);
  }
}

void Simulation::PrintProgress(int w, const WindowStats& s) {
  if (!o_.progress) return;
  std::string diag;
  for (const auto& [key, d] : seen_) {
    absl::StrAppend(&diag, diag.empty() ? "" : ", ", d.kind, "[",
                    RankListString(d.ranks).substr(0, 24), "] ", d.team);
  }
  std::string eng;
  if (engine_) {
    const ProcessUsage u = engine_->Usage();
    eng = absl::StrCat("; engine ", json::Fixed(u.cpu_s - s.engine_cpu_s, 2),
                       " CPU-s so far in this window, RSS ", Mb(static_cast<double>(u.rss_bytes)));
  }
  fprintf(stderr,
          "xpu-sim: window %d/%d: steps span %.2f s; %llu records, %s sent in %.2f s (built in "
          "%.2f s)%s%s%s\n",
          w + 1, o_.windows, static_cast<double>(model_.last_span_ns()) * 1e-9,
          static_cast<unsigned long long>(s.records), Mb(static_cast<double>(s.bytes)).c_str(),
          s.send_s, s.build_s, s.late ? " LATE" : "", eng.c_str(),
          diag.empty() ? "" : ("; diagnoses: " + diag).c_str());
}

absl::StatusOr<SimReport> Simulation::Run() {
  RaiseFileLimit();
  if (absl::Status st = StartEngine(); !st.ok()) return st;
  if (absl::Status st = Connect(); !st.ok()) return st;
  // Window 0 starts at the first window boundary with a little set-up time.
  t0_ = (NowNs() + window_ns_ / 5) / window_ns_ * window_ns_ + window_ns_;
  const uint64_t delta = std::clamp<uint64_t>(window_ns_ / 50, 20000000ull, 200000000ull);
  if (o_.progress) {
    fprintf(stderr, "xpu-sim: %d ranks on %d hosts (%s), engine %s; window 0 starts in %.1f s\n",
            model_.ranks(), model_.hosts(), o_.model.layout.name.c_str(), target_.c_str(),
            static_cast<double>(t0_ - std::min(t0_, NowNs())) * 1e-9);
  }
  for (int w = 0; w < o_.windows; ++w) {
    const uint64_t start = t0_ + static_cast<uint64_t>(w) * window_ns_;
    SleepUntilNs(start + delta);
    WindowStats s;
    if (engine_) s.engine_cpu_s = engine_->Usage().cpu_s;
    const auto b0 = std::chrono::steady_clock::now();
    {
      std::unique_lock<std::shared_mutex> l(model_mu_);
      model_.RunWindow(w, start + delta);
    }
    s.build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - b0).count();
    SendWindow(start, delta, &s);
    if (s.records > 0) {
      record_bytes_ += s.bytes;
      steps_with_records_ += model_.StepEnds(0).size();
    }
    SleepUntilNs(start + window_ns_ / 2);
    PollDiagnoses();
    stats_.push_back(s);
    PrintProgress(w, s);
  }
  // The last window is analysed at the next boundary; the final poll waits
  // for that analysis (a large job's can take most of a window).
  SleepUntilNs(t0_ + static_cast<uint64_t>(o_.windows) * window_ns_ + window_ns_ / 10);
  WaitForAnalysis(t0_ + static_cast<uint64_t>(o_.windows) * window_ns_);
  PollDiagnoses();
  TimeQueries();
  if (engine_) {
    usage_end_ = engine_->Usage();
    engine_cpu_end_ = usage_end_.cpu_s;
  }
  Disconnect();
  SimReport r = Report();
  if (engine_) engine_->Stop(20, o_.keep_engine_dir);
  return r;
}

std::optional<uint64_t> Simulation::AnalysedUntil() {
  grpc::ClientContext ctx;
  if (!token_.empty()) ctx.AddMetadata("x-xpu-token", token_);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  xpu::v1::JobsRequest req;
  xpu::v1::JobsReply reply;
  if (!query_->Jobs(&ctx, req, &reply).ok()) return std::nullopt;
  for (const xpu::v1::JobInfo& j : reply.jobs()) {
    if (j.job() == o_.model.job) {
      records_late_ = static_cast<int64_t>(j.records_late());
      return j.analysed_until_ns();
    }
  }
  return std::nullopt;
}

void Simulation::WaitForAnalysis(uint64_t window_end_ns) {
  const uint64_t deadline = window_end_ns + std::max<uint64_t>(2 * window_ns_, 60000000000ull);
  while (true) {
    const std::optional<uint64_t> done = AnalysedUntil();
    const uint64_t now = NowNs();
    if (done && *done >= window_end_ns) {
      analysis_lag_s_ = static_cast<double>(now - std::min(now, window_end_ns)) * 1e-9;
      return;
    }
    if (now >= deadline) {
      analysis_lag_s_ = -1;
      if (o_.progress) {
        fprintf(stderr,
                "xpu-sim: the engine did not finish analysing the last window within %.0f s\n",
                static_cast<double>(deadline - window_end_ns) * 1e-9);
      }
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

void Simulation::TimeQueries() {
  const std::string cli = FindCliBinary();
  if (cli.empty()) {
    queries_ = "no xpu CLI next to xpu-sim";
    return;
  }
  std::vector<std::string> common = {"--engine", target_};
  if (!token_file_.empty()) {
    common.push_back("--token-file");
    common.push_back(token_file_);
  }
  const std::vector<std::pair<std::string, std::vector<std::string>>> commands = {
      {"status", {"status"}},
      {"diagnose", {"diagnose", "--job", o_.model.job}},
      {"diagnose_all", {"diagnose", "--all", "--job", o_.model.job}}};
  queries_ = json::Json::object();
  for (const auto& [name, words] : commands) {
    std::vector<std::string> argv = {cli};
    argv.insert(argv.end(), words.begin(), words.end());
    argv.insert(argv.end(), common.begin(), common.end());
    const TimedRun t = RunTimed(argv);
    queries_[name + "_s"] = json::Fixed(t.wall_s, 3);
    queries_[name + "_exit"] = t.exit_status;
  }
}

json::Json Simulation::EngineJson() {
  json::Json e;
  e["target"] = target_;
  e["started_by_sim"] = engine_ != nullptr;
  if (!engine_) return e;
  const double cpu = engine_cpu_end_ - (stats_.empty() ? 0 : stats_.front().engine_cpu_s);
  double max_w = 0;
  for (size_t w = 0; w < stats_.size(); ++w) {
    const double next = w + 1 < stats_.size() ? stats_[w + 1].engine_cpu_s : engine_cpu_end_;
    max_w = std::max(max_w, next - stats_[w].engine_cpu_s);
  }
  const double per_window = stats_.empty() ? 0 : cpu / static_cast<double>(stats_.size());
  e["cpu_s"] = json::Fixed(cpu, 3);
  e["cpu_s_per_window"] = json::Fixed(per_window, 3);
  e["cpu_s_per_window_max"] = json::Fixed(max_w, 3);
  e["cpu_us_per_rank_window"] = json::Fixed(per_window * 1e6 / model_.ranks(), 2);
  e["cores_for_real_time"] = json::Fixed(per_window / o_.window_s, 3);
  e["peak_rss_bytes"] = usage_end_.peak_rss_bytes;
  e["rss_bytes"] = usage_end_.rss_bytes;
  e["rss_at_start_bytes"] = rss_baseline_;
  e["rss_per_rank_bytes"] =
      usage_end_.peak_rss_bytes > rss_baseline_
          ? (usage_end_.peak_rss_bytes - rss_baseline_) / static_cast<uint64_t>(model_.ranks())
          : 0;
  e["threads"] = usage_end_.threads;
  if (!o_.engine_cpus.empty()) e["cpus"] = o_.engine_cpus;
  return e;
}

SimReport Simulation::Report() {
  std::vector<DiagnosisSeen> seen;
  for (const auto& [key, d] : seen_) seen.push_back(d);
  const Judgement j = Judge(
      o_.model.faults, [this](int32_t r) { return model_.RingNext(r); }, seen, t0_, window_ns_,
      o_.max_windows);
  uint64_t sent = 0, dropped = 0, bytes = 0, late = 0;
  for (const auto& s : streams_) {
    sent += s->records_sent();
    dropped += s->records_dropped();
    bytes += s->bytes_sent();
  }
  for (const WindowStats& s : stats_) late += s.late;
  json::Json out;
  out["ok"] = j.ok;
  out["ranks"] = model_.ranks();
  out["hosts"] = model_.hosts();
  out["layout"] = o_.model.layout.name;
  out["layers"] = o_.model.layers;
  out["timing"] = o_.model.timing == TimingPolicy::kSampled ? "sampled" : "all";
  const bool compact =
      o_.compact_records && !streams_.empty() && streams_.front()->compact_records();
  out["wire"] = compact ? "compact" : "raw";
  out["windows"] = o_.windows;
  out["window_s"] = o_.window_s;
  out["steps"] = model_.steps_done();
  out["records_sent"] = sent;
  out["records_dropped"] = dropped;
  // Applied by the engine after their window was analysed: each went to
  // the next window's analysis instead (-1: not known).
  out["records_late"] = records_late_;
  out["bytes_sent"] = bytes;
  const double rank_steps = static_cast<double>(model_.ranks()) *
                            static_cast<double>(std::max<uint64_t>(1, steps_with_records_));
  out["bytes_per_rank_step"] = json::Fixed(static_cast<double>(record_bytes_) / rank_steps, 1);
  out["records_per_rank_step"] =
      json::Fixed(static_cast<double>(model_.records_emitted()) / rank_steps, 1);
  out["late_windows"] = late;
  // Seconds from the end of the last window until the engine had analysed
  // it (its diagnoses queued for the history), at the sim's 0.5 s polls;
  // -1 when it had not within max(2 windows, 60 s).
  out["analysis_lag_s"] = json::Fixed(analysis_lag_s_, 1);
  if (model_.hang().active) {
    const HangState& h = model_.hang();
    json::Json hj;
    hj["window"] = h.window;
    hj["comm_id"] = h.comm_id;
    hj["seq"] = h.seq;
    hj["members"] = h.comm_nranks;
    hj["issued_s_after_window0"] =
        json::Fixed((static_cast<double>(h.since_ns) - static_cast<double>(t0_)) * 1e-9, 3);
    hj["hook_floor_s"] = static_cast<double>(floor_ns_) * 1e-9;
    out["hang"] = hj;
  }
  out["engine"] = EngineJson();
  out["queries"] = queries_;
  json::Json faults = json::Json::array();
  for (const FaultOutcome& o : j.faults) faults.push_back(OutcomeJson(o));
  out["faults"] = faults;
  json::Json diags = json::Json::array();
  const uint64_t fault_ns =
      o_.model.faults.empty()
          ? 0
          : t0_ + static_cast<uint64_t>(o_.model.faults.front().at_window) * window_ns_;
  for (const DiagnosisSeen& d : seen) diags.push_back(DiagnosisJson(d, fault_ns));
  out["diagnoses"] = diags;
  json::Json unexpected = json::Json::array();
  for (const DiagnosisSeen* d : j.unexpected) unexpected.push_back(d->kind + " " + d->subject);
  out["unexpected"] = unexpected;
  if (!poll_error_.empty()) out["query_error"] = poll_error_;
  return SimReport{out, j.ok};
}

}  // namespace

absl::StatusOr<SimReport> RunSimulation(const SimOptions& o) {
  Simulation sim(o);
  return sim.Run();
}

}  // namespace xpu::sim
