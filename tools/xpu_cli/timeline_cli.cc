#include "tools/xpu_cli/timeline_cli.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/timeline/dump_outputs.h"
#include "common/timeline/rank_dump.h"
#include "common/timeline/summary.h"
#include "tools/xpu_cli/cli.h"
#include "tools/xpu_cli/command.h"
#include "xpu/v1/query.grpc.pb.h"

namespace xpu::cli {
namespace {

namespace tl = ::xpu::timeline;

const char kTimelineHelp[] = R"(xpu timeline: on-demand timelines from the daemons' history.

xpu timeline dump --job JOB [--ranks 0-7,12|all] [--max-ranks N] [--last N | --since T]
                  [--before T] [--out DIR]
                  [--format perfetto|json|both|auto] [--deadline-s S]
                  [--no-engine-fallback] [--json]
    Asks every daemon holding one of the ranks for what it kept (exited
    ranks included), shows progress, and writes into DIR (default
    ./xpu-timeline-JOB-<time>):
      trace.perfetto-trace  Perfetto trace (open in ui.perfetto.dev)
      trace.json            Chrome trace-event JSON (format json/both, or auto
                            for dumps up to 200000 ops)
      callsites.folded, callsites.svg   kernel call-site flame graph (when the
                            job recorded Python call sites)
      raw/*.xpb             the records as received (32 bytes per op)
      dump.json             manifest: ranks answered / missing, clock offsets
    GPU times are aligned across hosts with clock offsets estimated from
    collective completion (reference: the lowest rank).
    Without --ranks, a job of more than --max-ranks ranks (default 64) is
    dumped as its suspects (the ranks active diagnoses name), their peers
    (same host, neighbouring ranks) and ranks spread across the job, so the
    trace stays one a person can open; dump says what was left out
    (dump.json: selection, ranks_left_out). --ranks all: every rank.
    --last N: the last N records per rank; --since T: ns since the epoch or
    an age (90s, 5m, 2h); --before T: only records that started before T.
    A daemon shares its reply budget equally among its ranks; when that
    leaves older records out, dump says so and prints the next page's
    command (--before the newest of the ranks' oldest records; also
    next_before_ns in dump.json). --deadline-s: wait for daemons (default 30).
    Ranks whose daemon does not answer come from the engine's own
    recent-record ring (listed as such) unless --no-engine-fallback.

xpu timeline summary (--in DIR | --job JOB [--ranks ..] [--last N | --since T]) [--top N] [--json]
    Top N signatures by time (default 15; also bounds the communicator list), per-rank step breakdown (step time, compute /
    communication / host time, V_inter, V_minority, GEMM TFLOPS), communicator
    bus bandwidth and clock offsets, computed on the dumped window only.
JSON (summary): {job, window_start_ns, window_end_ns, ops, top: [...], ranks: [...],
       communicators: [...], clock: {reference_rank, hosts: [{host, offset_ns, ...}]}}
)";

// Options of `timeline dump` and `timeline summary` (the connection, --job
// and --json are CommonFlags). Numbers stay text until BuildRequest checks
// them, so that the messages name what was wrong.
struct Flags {
  bool no_engine_fallback = false;
  std::string ranks, last, since, before, out, in, format = "auto", deadline_s, top;
  std::string max_ranks = "64";
};

// The default selection's size for large jobs (--max-ranks).
constexpr size_t kMaxRanksLimit = 1 << 20;

uint64_t NowNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

std::string DefaultOutDir(const std::string& job) {
  const std::string stamp = absl::FormatTime("%Y%m%d-%H%M%S", absl::Now(), absl::UTCTimeZone());
  std::string safe = job;
  for (char& c : safe) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
      c = '_';
  }
  return absl::StrCat("xpu-timeline-", safe, "-", stamp);
}

struct Fetched {
  std::vector<tl::RankDump> ranks;
  xpu::v1::TimelineDumpDone done;
  double seconds = 0;
  uint64_t raw_bytes = 0;
  uint64_t next_before_ns = 0;  // the next page's --before, when a budget left records out
};

// The next (older) page's --before when a daemon's budget left records out:
// the newest of the ranks' oldest records, so that no rank's older records
// fall between the pages (ranks that were not cut may appear in both).
uint64_t NextPageBefore(const std::vector<tl::RankDump>& ranks) {
  uint64_t before = 0;
  for (const tl::RankDump& d : ranks) {
    uint64_t oldest = ~0ull;
    for (size_t i = 0; i < d.size(); ++i) oldest = std::min(oldest, d.Record(i).start_ns);
    if (oldest != ~0ull) before = std::max(before, oldest);
  }
  return before;
}

// Runs Query.TimelineDump; writes raw files into `raw_dir` when not empty.
int Fetch(const Invocation& in, const xpu::v1::TimelineDumpRequest& req, const std::string& raw_dir,
          Fetched* got) {
  std::ostream& err = in.err;
  EngineConnection conn;
  if (!ResolveConnection(in.common.connection, in.env_engine, &conn, err)) return kExitUsage;
  const std::string& engine = conn.address;
  const std::shared_ptr<grpc::ChannelCredentials>& creds = conn.credentials;
  const std::string& token = conn.token;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(512 << 20);  // one rank's history per message
  auto stub = xpu::v1::Query::NewStub(grpc::CreateCustomChannel(engine, creds, args));
  grpc::ClientContext ctx;
  // Daemons get the request deadline; transfers and the engine get 60 s more.
  const uint64_t deadline_ms = req.deadline_ms() > 0 ? req.deadline_ms() : 30000;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(deadline_ms + 60000));
  if (!token.empty()) ctx.AddMetadata(kTokenMetadataKey, token);
  const auto t0 = std::chrono::steady_clock::now();
  auto reader = stub->TimelineDump(&ctx, req);
  xpu::v1::TimelineDumpMessage m;
  bool have_done = false;
  auto last_print = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  std::string write_error;
  while (reader->Read(&m)) {
    if (m.has_progress()) {
      const auto& p = m.progress();
      const auto now = std::chrono::steady_clock::now();
      if (now - last_print > std::chrono::milliseconds(250) ||
          p.daemons_answered() == p.daemons_total()) {
        err << absl::StrFormat("xpu timeline: %d/%d ranks answered (%d/%d daemons, %.1f s)\n",
                               p.ranks_answered(), p.ranks_total(), p.daemons_answered(),
                               p.daemons_total(), p.elapsed_ms() / 1000.0);
        last_print = now;
      }
    } else if (m.has_rank()) {
      if (!raw_dir.empty() && write_error.empty()) {
        absl::StatusOr<uint64_t> b = tl::WriteRaw(raw_dir, m.rank());
        if (b.ok()) {
          got->raw_bytes += *b;
        } else {
          write_error = std::string(b.status().message());
        }
      }
      absl::StatusOr<tl::RankDump> d = tl::FromProcessBatch(std::move(*m.mutable_rank()));
      if (!d.ok()) {
        err << "xpu timeline: skipping a malformed process: " << d.status().message() << "\n";
        continue;
      }
      got->ranks.push_back(std::move(*d));
    } else if (m.has_done()) {
      got->done = m.done();
      have_done = true;
    }
  }
  grpc::Status st = reader->Finish();
  got->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!st.ok()) {
    if (st.error_code() == grpc::StatusCode::UNAVAILABLE) {
      err << "cannot reach engine at " << engine << ": " << st.error_message() << "\n";
      return kExitUnreachable;
    }
    if (st.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      err << "xpu timeline: the engine at " << engine << " does not support timeline dumps\n";
      return kExitNotAvailable;
    }
    err << "xpu timeline: engine at " << engine << " answered: " << st.error_message() << "\n";
    return kExitEngineError;
  }
  if (!write_error.empty()) {
    err << "xpu timeline: " << write_error << "\n";
    return kExitEngineError;
  }
  if (!have_done) {
    err << "xpu timeline: the engine ended the dump early\n";
    return kExitEngineError;
  }
  for (const auto& miss : got->done.missing()) {
    err << "xpu timeline: rank " << miss.rank() << " did not answer"
        << (miss.daemon_id().empty() ? "" : " (daemon " + miss.daemon_id() + ")") << ": "
        << miss.reason() << "\n";
  }
  for (const auto& f : got->done.from_engine()) {
    err << "xpu timeline: rank " << f.rank() << " from the engine's recent-record ring (daemon "
        << f.daemon_id() << ": " << f.reason() << ")\n";
  }
  for (const auto& d : got->done.truncated_daemons()) {
    err << "xpu timeline: daemon " << d
        << " hit its reply budget, shared equally by its ranks: their oldest records are left "
           "out; ask for fewer ranks (--ranks) or a shorter span (--since, --last) to get "
           "them\n";
  }
  if (got->done.truncated_daemons_size() > 0) {
    got->next_before_ns = NextPageBefore(got->ranks);
    if (got->next_before_ns != 0) {
      err << "xpu timeline: the next (older) page: xpu timeline dump --job " << req.job()
          << " --before " << got->next_before_ns
          << (req.ranks_size() > 0 ? " --ranks ..." : "") << "\n";
    }
  }
  tl::SortRanks(&got->ranks);
  return kExitOk;
}

bool BuildRequest(const Flags& f, const std::string& job, xpu::v1::TimelineDumpRequest* req,
                  std::string* error) {
  req->set_job(job);
  req->set_no_engine_fallback(f.no_engine_fallback);
  if (!f.ranks.empty() && f.ranks != "all") {
    std::vector<int32_t> ranks;
    if (!ParseRankList(f.ranks, &ranks)) {
      *error = "bad --ranks '" + f.ranks + "' (expected e.g. 0-7,12, or all)";
      return false;
    }
    for (int32_t r : ranks) req->add_ranks(r);
  }
  if (!f.last.empty() && !f.since.empty()) {
    *error = "--last and --since are exclusive";
    return false;
  }
  if (!f.last.empty()) {
    uint64_t n = 0;
    if (!absl::SimpleAtoi(f.last, &n) || n == 0) {
      *error = "bad --last '" + f.last + "'";
      return false;
    }
    req->set_last_n(n);
  }
  if (!f.since.empty()) {
    uint64_t since = 0;
    if (!ParseSince(f.since, NowNs(), &since)) {
      *error = "bad --since '" + f.since + "' (ns since the epoch, or an age like 90s, 5m, 2h)";
      return false;
    }
    req->set_since_ns(since);
  }
  if (!f.before.empty()) {
    uint64_t before = 0;
    if (!ParseSince(f.before, NowNs(), &before) || before == 0) {
      *error = "bad --before '" + f.before + "' (ns since the epoch, or an age like 90s, 5m, 2h)";
      return false;
    }
    if (before <= req->since_ns()) {
      *error = "--before must be later than --since";
      return false;
    }
    req->set_until_ns(before);
  }
  if (!f.deadline_s.empty()) {
    double s = 0;
    if (!absl::SimpleAtod(f.deadline_s, &s) || s <= 0 || s > 3600) {
      *error = "bad --deadline-s '" + f.deadline_s + "'";
      return false;
    }
    req->set_deadline_ms(static_cast<uint64_t>(s * 1000));
  }
  return true;
}

tl::DumpContext Context(const xpu::v1::TimelineDumpRequest& req, const Fetched& got) {
  tl::DumpContext ctx;
  ctx.job = req.job();
  ctx.ranks_requested.assign(req.ranks().begin(), req.ranks().end());
  ctx.ranks_total = got.done.ranks_total();
  ctx.ranks_answered = got.done.ranks_answered();
  for (const auto& m : got.done.missing())
    ctx.missing.push_back(absl::StrCat("rank ", m.rank(), ": ", m.reason()));
  for (const auto& m : got.done.from_engine()) {
    ctx.from_engine.push_back(absl::StrCat("rank ", m.rank(), ": ", m.reason()));
  }
  ctx.truncated_daemons.assign(got.done.truncated_daemons().begin(),
                               got.done.truncated_daemons().end());
  ctx.last_n = req.last_n();
  ctx.since_ns = req.since_ns();
  ctx.until_ns = req.until_ns();
  ctx.next_before_ns = got.next_before_ns;
  ctx.fetch_s = got.seconds;
  return ctx;
}

// The job's ranks and active diagnoses, for the default selection.
int FetchJobView(const Invocation& in, xpu::v1::RanksReply* ranks,
                 xpu::v1::DiagnosesReply* diagnoses) {
  EngineConnection conn;
  if (!ResolveConnection(in.common.connection, in.env_engine, &conn, in.err)) return kExitUsage;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(512 << 20);  // 100k ranks' rows
  auto stub =
      xpu::v1::Query::NewStub(grpc::CreateCustomChannel(conn.address, conn.credentials, args));
  auto call = [&](auto rpc, const auto& req, auto* reply) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    if (!conn.token.empty()) ctx.AddMetadata(kTokenMetadataKey, conn.token);
    return (stub.get()->*rpc)(&ctx, req, reply);
  };
  xpu::v1::RanksRequest rreq;
  rreq.set_job(in.common.job);
  grpc::Status st = call(&xpu::v1::Query::Stub::Ranks, rreq, ranks);
  if (st.ok()) {
    xpu::v1::DiagnosesRequest dreq;
    dreq.set_job(in.common.job);
    st = call(&xpu::v1::Query::Stub::Diagnoses, dreq, diagnoses);
  }
  if (st.ok()) return kExitOk;
  if (st.error_code() == grpc::StatusCode::UNAVAILABLE ||
      st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    in.err << "cannot reach engine at " << conn.address << ": " << st.error_message() << "\n";
    return kExitUnreachable;
  }
  in.err << "xpu timeline: engine at " << conn.address << " answered: " << st.error_message()
         << "\n";
  return kExitEngineError;
}

// Without --ranks, a job of more than --max-ranks ranks is dumped as its
// suspects, their peers and ranks spread across it; says what was left out.
int ApplyDefaultSelection(const Flags& f, const Invocation& in,
                          xpu::v1::TimelineDumpRequest* req, tl::DumpContext* ctx) {
  if (!f.ranks.empty()) return kExitOk;
  size_t max = 0;
  if (!absl::SimpleAtoi(f.max_ranks, &max) || max == 0 || max > kMaxRanksLimit) {
    in.err << "xpu timeline: bad --max-ranks '" << f.max_ranks << "' (1 to " << kMaxRanksLimit
           << ")\n";
    return kExitUsage;
  }
  xpu::v1::RanksReply ranks;
  xpu::v1::DiagnosesReply diagnoses;
  if (int rc = FetchJobView(in, &ranks, &diagnoses); rc != kExitOk) return rc;
  const RankSelection sel = SelectDefaultRanks(ranks, diagnoses, max);
  if (sel.ranks.empty()) return kExitOk;
  for (int32_t r : sel.ranks) req->add_ranks(r);
  const size_t left = sel.total - sel.ranks.size();
  ctx->selection = absl::StrFormat(
      "%d of %d ranks (--max-ranks %d): %d suspect(s)%s, %d peer(s), %d spread across the job",
      sel.ranks.size(), sel.total, max, sel.suspects,
      sel.suspect_text.empty() ? "" : " " + sel.suspect_text, sel.peers, sel.spread);
  ctx->ranks_left_out = left;
  in.err << "xpu timeline: job " << in.common.job << " has " << sel.total << " ranks; dumping "
         << ctx->selection << ". " << left
         << " ranks left out: --ranks all for every rank (a trace of the whole job), --ranks LIST "
            "for others, or a larger --max-ranks\n";
  return kExitOk;
}

int Dump(const Flags& f, const Invocation& in) {
  std::ostream& out = in.out;
  std::ostream& err = in.err;
  const std::string& job = in.common.job;
  if (job.empty()) {
    err << "xpu timeline dump: --job JOB is required\n";
    return kExitUsage;
  }
  tl::TraceFormat format;
  if (!tl::ParseTraceFormat(f.format, &format)) {
    err << "xpu timeline dump: bad --format '" << f.format << "' (perfetto, json, both or auto)\n";
    return kExitUsage;
  }
  xpu::v1::TimelineDumpRequest req;
  std::string error;
  if (!BuildRequest(f, job, &req, &error)) {
    err << "xpu timeline dump: " << error << "\n";
    return kExitUsage;
  }
  tl::DumpContext selection;
  if (int rc = ApplyDefaultSelection(f, in, &req, &selection); rc != kExitOk) return rc;
  const std::string dir = !f.out.empty() ? f.out : DefaultOutDir(job);
  Fetched got;
  if (int rc = Fetch(in, req, dir, &got); rc != kExitOk) return rc;
  if (got.ranks.empty()) {
    err << "xpu timeline dump: no rank answered; nothing written\n";
    return kExitEngineError;
  }
  tl::DumpContext ctx = Context(req, got);
  ctx.selection = selection.selection;
  ctx.ranks_left_out = selection.ranks_left_out;
  absl::StatusOr<tl::DumpOutputs> o = tl::WriteDumpOutputs(dir, got.ranks, format, ctx);
  if (!o.ok()) {
    err << "xpu timeline dump: " << o.status().message() << "\n";
    return kExitEngineError;
  }
  if (in.common.json) {
    bool ok = true;
    out << ReadFile(o->manifest_path, &ok);
    return kExitOk;
  }
  out << absl::StrFormat("job %s: %d/%d ranks, %d ops (%d bytes packed, %.1f bytes/op) in %.2f s\n",
                         job, got.done.ranks_answered(), got.done.ranks_total(), o->ops,
                         o->packed_bytes, o->ops ? double(o->packed_bytes) / o->ops : 0.0,
                         got.seconds);
  if (!o->perfetto_path.empty()) {
    out << absl::StrFormat("  %-40s %d bytes, %d slices, %d flow events\n", o->perfetto_path,
                           o->perfetto.bytes, o->perfetto.slices, o->perfetto.flow_events);
  }
  if (!o->json_path.empty())
    out << absl::StrFormat("  %-40s %d bytes\n", o->json_path, o->json.bytes);
  if (!o->svg_path.empty()) {
    out << absl::StrFormat(
        "  %-40s %d call-site samples, %d linked to their launch, %d placed by time\n", o->svg_path,
        o->callsites.samples, o->callsites.linked_exact, o->callsites.linked_nearby);
  }
  out << absl::StrFormat("  %-40s manifest\n", o->manifest_path);
  out << "clock offsets (reference rank " << o->clock.reference_rank << "):\n";
  for (const tl::HostOffset& h : o->clock.hosts) {
    out << absl::StrFormat(
        "  %-20s %+12.3f us  %s\n", h.host, h.offset_ns * 1e-3,
        h.aligned ? (h.samples ? absl::StrCat("from ", h.samples, " collectives") : "reference")
                  : "not aligned (no shared collective)");
  }
  if (got.done.missing_size() > 0)
    out << got.done.missing_size() << " rank(s) missing, see above\n";
  return kExitOk;
}

int Summary(const Flags& f, const Invocation& in) {
  std::ostream& out = in.out;
  std::ostream& err = in.err;
  if (f.in.empty() == in.common.job.empty()) {
    err << "xpu timeline summary: give either --in DIR or --job JOB\n";
    return kExitUsage;
  }
  size_t top_n = 15;
  if (!f.top.empty() && (!absl::SimpleAtoi(f.top, &top_n) || top_n == 0)) {
    err << "xpu timeline summary: --top wants a positive number, got '" << f.top << "'\n";
    return kExitUsage;
  }
  std::vector<tl::RankDump> ranks;
  if (!f.in.empty()) {
    absl::StatusOr<std::vector<tl::RankDump>> r = tl::ReadRawDir(f.in);
    if (!r.ok()) {
      err << "xpu timeline summary: " << r.status().message() << "\n";
      return kExitEngineError;
    }
    ranks = std::move(*r);
  } else {
    xpu::v1::TimelineDumpRequest req;
    std::string error;
    if (!BuildRequest(f, in.common.job, &req, &error)) {
      err << "xpu timeline summary: " << error << "\n";
      return kExitUsage;
    }
    tl::DumpContext selection;
    if (int rc = ApplyDefaultSelection(f, in, &req, &selection); rc != kExitOk) return rc;
    Fetched got;
    if (int rc = Fetch(in, req, f.out, &got); rc != kExitOk) return rc;
    if (got.ranks.empty()) {
      err << "xpu timeline summary: no rank answered\n";
      return kExitEngineError;
    }
    ranks = std::move(got.ranks);
  }
  tl::TimelineSummary s = tl::Summarize(ranks, tl::EstimateClockOffsets(ranks), top_n);
  out << (in.common.json ? tl::SummaryJson(s) : tl::SummaryText(s));
  return kExitOk;
}

}  // namespace

RankSelection SelectDefaultRanks(const xpu::v1::RanksReply& ranks,
                                 const xpu::v1::DiagnosesReply& diagnoses, size_t max) {
  RankSelection sel;
  std::map<int32_t, std::string> host_of;
  for (const xpu::v1::RankInfo& r : ranks.ranks()) {
    if (r.rank() >= 0) host_of.emplace(r.rank(), r.host());
  }
  sel.total = host_of.size();
  if (sel.total <= max) return sel;
  std::vector<int32_t> all;
  std::map<std::string, std::vector<int32_t>> by_host;
  for (const auto& [rank, host] : host_of) {
    all.push_back(rank);
    by_host[host].push_back(rank);
  }
  std::set<int32_t> chosen;
  // Suspects: ranks of active diagnoses that single out a few ranks (a
  // job-wide diagnosis names them all and singles out none).
  std::vector<int32_t> suspects;
  std::vector<std::string> text;
  for (const xpu::v1::DiagnosisInfo& d : diagnoses.diagnoses()) {
    if (!d.active() || d.ranks_size() == 0 || static_cast<size_t>(d.ranks_size()) > max / 4)
      continue;
    for (int32_t r : d.ranks()) {
      if (suspects.size() >= max / 2 || !host_of.count(r) || !chosen.insert(r).second) continue;
      suspects.push_back(r);
      text.push_back(absl::StrCat(r, " (", d.kind(), ")"));
    }
  }
  sel.suspects = suspects.size();
  sel.suspect_text = absl::StrJoin(text, ", ");
  // Peers: the other ranks of a suspect's host, then its neighbouring ranks.
  const size_t peer_limit = std::max(chosen.size(), max * 3 / 4);
  auto add_peer = [&](int32_t r) {
    if (chosen.size() < peer_limit && host_of.count(r) && chosen.insert(r).second) sel.peers++;
  };
  for (int32_t s : suspects) {
    for (int32_t r : by_host[host_of[s]]) add_peer(r);
  }
  for (int32_t s : suspects) {
    add_peer(s - 1);
    add_peer(s + 1);
  }
  // Spread: evenly over the job, the lowest rank (the clock reference) first.
  const size_t room = max - std::min(max, chosen.size());
  for (size_t i = 0; i < room; ++i) {
    const size_t at = i * all.size() / room;
    for (size_t j = at; j < all.size(); ++j) {
      if (chosen.insert(all[j]).second) {
        sel.spread++;
        break;
      }
    }
  }
  sel.ranks.assign(chosen.begin(), chosen.end());
  return sel;
}

bool ParseRankList(const std::string& s, std::vector<int32_t>* out) {
  out->clear();
  if (s.empty()) return false;
  std::set<int32_t> seen;
  for (absl::string_view part : absl::StrSplit(s, ',')) {
    part = absl::StripAsciiWhitespace(part);
    int64_t lo = 0, hi = 0;
    const size_t dash = part.find('-');
    if (dash == absl::string_view::npos) {
      if (!absl::SimpleAtoi(part, &lo)) return false;
      hi = lo;
    } else if (!absl::SimpleAtoi(part.substr(0, dash), &lo) ||
               !absl::SimpleAtoi(part.substr(dash + 1), &hi)) {
      return false;
    }
    if (lo < 0 || hi < lo || hi - lo > (1 << 20) || hi > INT32_MAX) return false;
    for (int64_t r = lo; r <= hi; ++r) {
      if (seen.insert(static_cast<int32_t>(r)).second) out->push_back(static_cast<int32_t>(r));
    }
  }
  return !out->empty();
}

bool ParseSince(const std::string& s, uint64_t now_ns, uint64_t* since_ns) {
  uint64_t v = 0;
  if (absl::SimpleAtoi(s, &v)) {
    *since_ns = v;
    return true;
  }
  static const std::pair<const char*, uint64_t> kUnits[] = {
      {"ms", 1000000ull}, {"s", 1000000000ull}, {"m", 60000000000ull}, {"h", 3600000000000ull}};
  for (const auto& [suffix, mult] : kUnits) {
    if (!absl::EndsWith(s, suffix)) continue;
    double n = 0;
    if (!absl::SimpleAtod(s.substr(0, s.size() - std::strlen(suffix)), &n) || n < 0) return false;
    const uint64_t age = static_cast<uint64_t>(n * static_cast<double>(mult));
    *since_ns = age < now_ns ? now_ns - age : 0;
    return true;
  }
  return false;
}

void AddTimelineCommands(CLI::App& xpu, CommonFlags* common, CommandTable* table) {
  auto tf = std::make_shared<Flags>();
  CLI::App* timeline = xpu.add_subcommand(
      "timeline", "on-demand timelines: Perfetto / Chrome traces, call-site flame graph, summary");
  timeline->require_subcommand(1, 1);
  timeline->footer(kTimelineHelp);
  auto window = [&](CLI::App* cmd) {
    AddCommonOptions(cmd, common, /*with_job=*/true);
    cmd->add_option("--ranks", tf->ranks,
                    "ranks to fetch, e.g. 0-7,12, or all (default: all ranks of a job of at "
                    "most --max-ranks; of a larger job its suspects, their peers and ranks "
                    "spread across it)")
        ->type_name("LIST");
    cmd->add_option("--max-ranks", tf->max_ranks,
                    "ranks dumped by default from a large job (without --ranks)")
        ->type_name("N")
        ->default_str("64");
    cmd->add_option("--last", tf->last, "the last N records per rank")->type_name("N");
    cmd->add_option("--since", tf->since,
                    "records since T: ns since the Unix epoch, or an age (90s, 5m, 2h)")
        ->type_name("T");
    cmd->add_option("--before", tf->before,
                    "records that started before T (same forms as --since): the next, older "
                    "page of a dump that hit a daemon's budget (dump prints the command)")
        ->type_name("T");
    cmd->add_option("--deadline-s", tf->deadline_s, "how long to wait for the daemons (default 30)")
        ->type_name("S");
  };
  CLI::App* dump = timeline->add_subcommand(
      "dump", "fetch the job's history from every daemon and write the traces into a directory");
  window(dump);
  dump->add_option("--out", tf->out, "directory to write (default ./xpu-timeline-JOB-<time>)")
      ->type_name("DIR");
  dump->add_option("--format", tf->format,
                   "perfetto, json, both or auto (JSON too for dumps up to 200000 ops)")
      ->type_name("FORMAT");
  dump->add_flag("--no-engine-fallback", tf->no_engine_fallback,
                 "ranks whose daemon does not answer are missing rather than taken from the "
                 "engine's recent-record ring");
  dump->footer("--json prints the manifest (DIR/dump.json, docs/timeline.md).");
  CLI::App* summary = timeline->add_subcommand(
      "summary", "top signatures, per-rank step breakdown, communicator bandwidth, clock offsets");
  window(summary);
  summary->add_option("--in", tf->in, "summarize a dump directory instead of fetching")
      ->type_name("DIR");
  summary->add_option("--top", tf->top, "signatures listed (also bounds the communicators)")
      ->type_name("N")
      ->default_str("15");
  summary->add_option("--out", tf->out, "also keep the raw records fetched in DIR")
      ->type_name("DIR");
  summary->footer(
      "JSON (summary): {job, window_start_ns, window_end_ns, ops, top: [...], ranks: [...], "
      "communicators: [...], clock: {reference_rank, hosts: [{host, offset_ns, ...}]}}");
  dump->group("Commands");
  summary->group("Commands");
  (*table)[dump] = [tf](const Invocation& in) { return Dump(*tf, in); };
  (*table)[summary] = [tf](const Invocation& in) { return Summary(*tf, in); };
}

}  // namespace xpu::cli
