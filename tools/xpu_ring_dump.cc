// xpu-ring-dump: prints a ring file written by the hook (XPU_RING_DIR files,
// or a live ring through /proc/<pid>/fd/<n>) without disturbing its reader:
// the file is mapped read-only and read_index is never written.
//
//   xpu-ring-dump [--json | --csv] [--no-records] [--limit N] RING_FILE
//
// Text output (default) shows header, counters, signatures and records.
// --json prints one JSON object per line: {"type":"header",...},
// {"type":"signature",...} and {"type":"record",...} with the signature's
// fields resolved, duration in ns, FLOPs and bytes (formulas.h).
// --csv prints one line per record with a header row.
//
// Python call sites (record.h XPU_OP_PY_CALLSITE): a link record is shown
// with the launch it belongs to ("launch": sig_id, seq, stream and the
// launch record's position when it is among the records printed), and a
// launch that has a link with its stack ("callsite_sig_id", "callsite").
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "common/cli/flags.h"
#include "common/json/json.h"
#include "common/record/op_kind.h"
#include "common/ring/ring_reader.h"
#include "xpu/formulas.h"

namespace {

using xpu::ring::RingReader;
using xpu::ring::RingReaderOptions;
using xpu::ring::RingRecord;
using xpu::ring::SignatureInfo;

const char* kCounterNames[] = {
    "dropped_full",        "sig_table_full",    "str_arena_full",  "event_pool_empty",
    "pending_full",        "cuda_error",        "symbol_missing",  "reentrant",
    "capture_skipped",     "launches_untraced", "records_written", "sampled",
    "daemon_connect_fail", "plugin_events",     "py_events",       "internal",
    "ring_not_sealed",     "ring_file_refused",   "hold_timeout",    "uncovered",
    "ring_truncated"};

// Names are sanitised to printable ASCII by the reader; quoted for CSV.
using xpu::json::Json;

void PrintLine(const Json& j) { std::printf("%s\n", xpu::json::Dump(j).c_str()); }

std::string CsvEscape(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// Call-site links joined to their launches among `recs` (record.h: the
// launch is the non-plugin record with the link's (launch sig_id, seq,
// stream); the nearest in time if seq wrapped around).
struct CallsiteJoin {
  std::map<size_t, size_t> launch_of_link;  // index of link -> index of launch
  std::map<size_t, size_t> link_of_launch;
};

CallsiteJoin JoinCallsites(const RingReader& reader, const std::vector<RingRecord>& recs) {
  auto kind_of = [&](uint32_t sig_id) {
    const SignatureInfo* s = reader.signature(sig_id);
    return s != nullptr ? s->sig.kind : 0u;
  };
  std::map<std::tuple<uint32_t, uint32_t, uint16_t>, std::vector<size_t>> launches;
  for (size_t i = 0; i < recs.size(); ++i) {
    const xpu_record_v1& r = recs[i].rec;
    if (kind_of(r.sig_id) == XPU_OP_PY_CALLSITE || (r.flags & XPU_REC_PLUGIN)) continue;
    launches[{r.sig_id, r.seq, r.stream}].push_back(i);
  }
  CallsiteJoin j;
  for (size_t i = 0; i < recs.size(); ++i) {
    const xpu_record_v1& r = recs[i].rec;
    const uint32_t launch_sig = xpu_callsite_launch_sig_id(&r);
    if (kind_of(r.sig_id) != XPU_OP_PY_CALLSITE || launch_sig == 0) continue;
    auto it = launches.find({launch_sig, r.seq, r.stream});
    if (it == launches.end()) continue;
    size_t best = it->second.front();
    auto gap = [&](size_t k) {
      const uint64_t a = recs[k].rec.start_ns;
      return a > r.start_ns ? a - r.start_ns : r.start_ns - a;
    };
    for (size_t k : it->second) {
      if (gap(k) < gap(best)) best = k;
    }
    j.launch_of_link[i] = best;
    j.link_of_launch[best] = i;
  }
  return j;
}

struct Args {
  bool json = false, csv = false;
  bool no_records = false;
  uint64_t limit = 0;
  std::string path;
};

// --json: the header, then one line per signature and per record.
void PrintJson(RingReader& reader, const std::vector<SignatureInfo>& sigs,
               const std::vector<RingRecord>& recs) {
  const auto& id = reader.identity();
  const auto& L = reader.layout();
  const auto live = reader.ReadLiveState();
  const auto& rc = reader.counters();
  Json counters = Json::object();
  for (size_t i = 0; i < sizeof(kCounterNames) / sizeof(kCounterNames[0]); ++i) {
    counters[kCounterNames[i]] = live.counters[i];
  }
  const Json header = {{"type", "header"},
                       {"job", id.job},
                       {"job_name", id.job_name},
                       {"host", id.host},
                       {"pid", id.pid},
                       {"rank", id.rank},
                       {"local_rank", id.local_rank},
                       {"world_size", id.world_size},
                       {"local_world_size", id.local_world_size},
                       {"device", id.device},
                       {"created_ns", id.created_ns},
                       {"start_time_ticks", id.start_time_ticks},
                       {"ring_capacity", L.ring_capacity},
                       {"sig_capacity", L.sig_capacity},
                       {"str_capacity", L.str_capacity},
                       {"file_size", L.file_size},
                       {"write_index", live.write_index},
                       {"read_index", live.read_index},
                       {"heartbeat_ns", live.heartbeat_ns},
                       {"producer_state", live.producer_state},
                       {"timing_policy", live.timing_policy},
                       {"counters", std::move(counters)},
                       {"reader",
                        {{"records", rc.records_read},
                         {"corrupt", rc.records_corrupt},
                         {"lapped", rc.records_lapped},
                         {"uncommitted", rc.records_abandoned},
                         {"signatures", rc.signatures_read},
                         {"signatures_corrupt", rc.signatures_corrupt}}}};
  PrintLine(header);
  for (const auto& s : sigs) {
    const auto& g = s.sig;
    PrintLine({{"type", "signature"},
               {"id", g.commit},
               {"kind", xpu::record::OpKindName(g.kind)},
               {"kind_id", g.kind},
               {"name", s.name},
               {"dtype", g.dtype},
               {"gemm_flags", g.gemm_flags},
               {"m", g.m},
               {"n", g.n},
               {"k", g.k},
               {"batch", g.batch},
               {"count", g.count},
               {"comm_id", g.comm_id},
               {"comm_rank", g.comm_rank},
               {"comm_nranks", g.comm_nranks},
               {"peer", g.peer},
               {"device", g.device},
               {"flops", xpu::json::Count(xpu_sig_flops(&g))},
               {"bytes", xpu_sig_bytes(&g)}});
  }
  const CallsiteJoin join = JoinCallsites(reader, recs);
  for (size_t i = 0; i < recs.size(); ++i) {
    const RingRecord& r = recs[i];
    const SignatureInfo* s = reader.signature(r.rec.sig_id);
    Json line = {{"type", "record"},
                 {"position", r.position},
                 {"sig_id", r.rec.sig_id},
                 {"kind", s ? xpu::record::OpKindName(s->sig.kind) : "unknown"},
                 {"name", s ? s->name : ""},
                 {"start_ns", r.rec.start_ns},
                 {"duration_ns", xpu_record_duration_ns(&r.rec)},
                 {"issue_latency_ns", r.rec.issue_latency_ns},
                 {"seq", r.rec.seq},
                 {"stream", r.rec.stream},
                 {"flags", r.rec.flags},
                 {"timed", (r.rec.flags & XPU_REC_TIMED) != 0},
                 {"flops", xpu::json::Count(s ? xpu_sig_flops(&s->sig) : 0.0)},
                 {"bytes", s ? xpu_sig_bytes(&s->sig) : 0},
                 {"comm_id", s ? s->sig.comm_id : 0}};
    const uint32_t launch_sig = xpu_callsite_launch_sig_id(&r.rec);
    if (s != nullptr && s->sig.kind == XPU_OP_PY_CALLSITE && launch_sig != 0) {
      auto it = join.launch_of_link.find(i);
      line["launch"] = {
          {"sig_id", launch_sig},
          {"seq", r.rec.seq},
          {"stream", r.rec.stream},
          {"position",
           it != join.launch_of_link.end() ? Json(recs[it->second].position) : Json(nullptr)}};
    }
    if (auto it = join.link_of_launch.find(i); it != join.link_of_launch.end()) {
      const uint32_t stack = recs[it->second].rec.sig_id;
      const SignatureInfo* cs = reader.signature(stack);
      line["callsite_sig_id"] = stack;
      line["callsite"] = cs ? cs->name : "";
    }
    PrintLine(line);
  }
}

// --csv: one line per record, with a header row.
void PrintCsv(RingReader& reader, const std::vector<RingRecord>& recs) {
  printf(
      "position,sig_id,kind,name,start_ns,duration_ns,issue_latency_ns,seq,stream,flags,timed,"
      "flops,bytes,"
      "comm_id\n");
  for (const auto& r : recs) {
    const SignatureInfo* s = reader.signature(r.rec.sig_id);
    printf("%" PRIu64 ",%u,%s,%s,%" PRIu64 ",%" PRIu64 ",%d,%u,%u,%u,%d,%.0f,%" PRIu64 ",%" PRIu64
           "\n",
           r.position, r.rec.sig_id, s ? xpu::record::OpKindName(s->sig.kind).c_str() : "unknown",
           CsvEscape(s ? s->name : "").c_str(), r.rec.start_ns, xpu_record_duration_ns(&r.rec),
           r.rec.issue_latency_ns, r.rec.seq, r.rec.stream, r.rec.flags,
           (r.rec.flags & XPU_REC_TIMED) ? 1 : 0, s ? xpu_sig_flops(&s->sig) : 0.0,
           s ? xpu_sig_bytes(&s->sig) : 0, s ? s->sig.comm_id : 0);
  }
}

// The readable form: header, counters, signatures and (unless --no-records)
// the records.
void PrintText(const Args& args, RingReader& reader, const std::vector<SignatureInfo>& sigs,
               const std::vector<RingRecord>& recs) {
  const auto& id = reader.identity();
  const auto& L = reader.layout();
  const auto live = reader.ReadLiveState();
  const auto& rc = reader.counters();
  printf("ring %s\n", args.path.c_str());
  printf(
      "  job=%s job_name=%s host=%s pid=%d rank=%d local_rank=%d world=%d local_world=%d "
      "device=%d\n",
      id.job.c_str(), id.job_name.c_str(), id.host.c_str(), id.pid, id.rank, id.local_rank,
      id.world_size, id.local_world_size, id.device);
  printf("  created_ns=%" PRIu64 " start_time_ticks=%" PRIu64 "\n", id.created_ns,
         id.start_time_ticks);
  printf("  ring_capacity=%u sig_capacity=%u str_capacity=%" PRIu64 " file_size=%" PRIu64 "\n",
         L.ring_capacity, L.sig_capacity, L.str_capacity, L.file_size);
  printf("  write_index=%" PRIu64 " read_index=%" PRIu64 " sig_count=%" PRIu64 " str_used=%" PRIu64
         " heartbeat_ns=%" PRIu64 " producer_state=%u timing_policy=%u\n",
         live.write_index, live.read_index, live.sig_count, live.str_used, live.heartbeat_ns,
         live.producer_state, live.timing_policy);
  printf("counters\n");
  for (size_t i = 0; i < sizeof(kCounterNames) / sizeof(kCounterNames[0]); ++i) {
    printf("  %-20s %" PRIu64 "\n", kCounterNames[i], live.counters[i]);
  }
  printf("  (read here: records=%" PRIu64 " corrupt=%" PRIu64 " lapped=%" PRIu64
         " uncommitted=%" PRIu64 ")\n",
         rc.records_read, rc.records_corrupt, rc.records_lapped, rc.records_abandoned);
  printf("signatures (%zu)\n", sigs.size());
  for (const auto& s : sigs) {
    const auto& g = s.sig;
    printf("  #%u %-13s %s", g.commit, xpu::record::OpKindName(g.kind).c_str(), s.name.c_str());
    if (g.kind == XPU_OP_GEMM)
      printf("  m=%u n=%u k=%u batch=%u dtype=%u flops=%.0f", g.m, g.n, g.k, g.batch, g.dtype,
             xpu_sig_flops(&g));
    if (xpu_op_is_collective(g.kind)) {
      printf("  count=%" PRIu64 " dtype=%u comm=%" PRIx64 " rank=%d/%d peer=%d bytes=%" PRIu64,
             g.count, g.dtype, g.comm_id, g.comm_rank, g.comm_nranks, g.peer, xpu_sig_bytes(&g));
    }
    printf("\n");
  }
  if (!args.no_records) {
    printf("records (%zu)\n", recs.size());
    const CallsiteJoin join = JoinCallsites(reader, recs);
    for (size_t i = 0; i < recs.size(); ++i) {
      const RingRecord& r = recs[i];
      const SignatureInfo* s = reader.signature(r.rec.sig_id);
      printf("  @%" PRIu64 " sig=%u %s start_ns=%" PRIu64 " dur_ns=%" PRIu64
             " lat_ns=%d seq=%u stream=%u flags=0x%x",
             r.position, r.rec.sig_id, s ? s->name.c_str() : "?", r.rec.start_ns,
             xpu_record_duration_ns(&r.rec), r.rec.issue_latency_ns, r.rec.seq, r.rec.stream,
             r.rec.flags);
      if (auto it = join.launch_of_link.find(i); it != join.launch_of_link.end()) {
        printf(" launch=@%" PRIu64, recs[it->second].position);
      }
      if (auto it = join.link_of_launch.find(i); it != join.link_of_launch.end()) {
        printf(" callsite=#%u", recs[it->second].rec.sig_id);
      }
      printf("\n");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "xpu-ring-dump: print an XPUTimer ring file (header, counters, signatures, records).");
  xpu::flags::Configure(app, "xpu-ring-dump");
  Args args;
  app.add_option("RING_FILE", args.path,
                 "a ring file (e.g. under $XPU_RING_DIR) or /proc/<pid>/fd/<n> of a live process")
      ->required();
  auto* json_flag = app.add_flag("--json", args.json,
                                 "one JSON object per line: header, signatures, records (sig "
                                 "fields resolved, duration_ns, flops, bytes)");
  auto* csv_flag = app.add_flag("--csv", args.csv, "one CSV line per record, with a header row");
  json_flag->excludes(csv_flag);
  app.add_flag("--no-records", args.no_records, "header, counters and signatures only");
  app.add_option("--limit", args.limit, "print at most the newest N records (0: all)")
      ->type_name("N")
      ->transform(xpu::flags::UnsignedAtLeast(0));
  app.footer(
      "The file is opened read-only; the daemon's read position is not touched. Records still "
      "in the ring (at most ring_capacity, the newest) are printed in ring order.");
  if (int rc = xpu::flags::ParseMain(app, argc, argv, 2); rc >= 0) return rc;
  RingReaderOptions ro;
  ro.read_only = true;
  ro.abandon_grace_ns = 0;  // a snapshot: uncommitted slots are skipped at once
  auto reader_or = RingReader::FromPath(args.path, ro);
  if (!reader_or.ok()) {
    fprintf(stderr, "xpu-ring-dump: %s: %s\n", args.path.c_str(),
            reader_or.status().ToString().c_str());
    return 1;
  }
  RingReader& reader = **reader_or;
  std::vector<SignatureInfo> sigs;
  reader.PollSignatures(&sigs);
  std::vector<RingRecord> recs;
  if (!args.no_records) {
    reader.Poll(0, ~size_t{0}, &recs);
    reader.PollSignatures(&sigs);  // signatures read on demand for records
    if (args.limit != 0 && recs.size() > args.limit)
      recs.erase(recs.begin(), recs.end() - args.limit);
  }
  if (args.json) {
    PrintJson(reader, sigs, recs);
  } else if (args.csv) {
    PrintCsv(reader, recs);
  } else {
    PrintText(args, reader, sigs, recs);
  }
  return 0;
}
