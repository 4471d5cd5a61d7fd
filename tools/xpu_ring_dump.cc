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

#include "daemon/ring_reader.h"
#include "xpu/formulas.h"

namespace {

using xpu::daemon::RingReader;
using xpu::daemon::RingReaderOptions;
using xpu::daemon::RingRecord;
using xpu::daemon::SignatureInfo;

const char* kHelp =
    "xpu-ring-dump: print an XPUTimer ring file (header, counters, signatures, records).\n"
    "\n"
    "Usage: xpu-ring-dump [--json | --csv] [--no-records] [--limit N] RING_FILE\n"
    "\n"
    "  RING_FILE     a ring file (e.g. under $XPU_RING_DIR) or /proc/<pid>/fd/<n> of a live "
    "process\n"
    "  --json        one JSON object per line: header, signatures, records (sig fields resolved,\n"
    "                duration_ns, flops, bytes)\n"
    "  --csv         one CSV line per record, with a header row\n"
    "  --no-records  header, counters and signatures only\n"
    "  --limit N     print at most the newest N records\n"
    "  --help        this text\n"
    "\n"
    "The file is opened read-only; the daemon's read position is not touched. Records still\n"
    "in the ring (at most ring_capacity, the newest) are printed in ring order.\n";

const char* KindName(uint32_t kind) {
  switch (kind) {
    case XPU_OP_KERNEL:
      return "kernel";
    case XPU_OP_GEMM:
      return "gemm";
    case XPU_OP_GRAPH_LAUNCH:
      return "graph_launch";
    case XPU_OP_MEMCPY:
      return "memcpy";
    case XPU_OP_ALLREDUCE:
      return "allreduce";
    case XPU_OP_ALLGATHER:
      return "allgather";
    case XPU_OP_REDUCESCATTER:
      return "reducescatter";
    case XPU_OP_BROADCAST:
      return "broadcast";
    case XPU_OP_REDUCE:
      return "reduce";
    case XPU_OP_ALLTOALL:
      return "alltoall";
    case XPU_OP_GATHER:
      return "gather";
    case XPU_OP_SCATTER:
      return "scatter";
    case XPU_OP_SEND:
      return "send";
    case XPU_OP_RECV:
      return "recv";
    case XPU_OP_SYNC_STREAM:
      return "sync_stream";
    case XPU_OP_SYNC_DEVICE:
      return "sync_device";
    case XPU_OP_SYNC_EVENT:
      return "sync_event";
    case XPU_OP_COMM_INIT:
      return "comm_init";
    case XPU_OP_COMM_DESTROY:
      return "comm_destroy";
    case XPU_OP_PY_GC:
      return "py_gc";
    case XPU_OP_PY_DATALOADER:
      return "py_dataloader";
    case XPU_OP_PY_SYNC:
      return "py_sync";
    case XPU_OP_PY_OPTIMIZER:
      return "py_optimizer";
    case XPU_OP_PY_CHECKPOINT:
      return "py_checkpoint";
    case XPU_OP_PY_API:
      return "py_api";
    case XPU_OP_STEP:
      return "step";
    case XPU_OP_ANNOTATION:
      return "annotation";
    case XPU_OP_PY_CALLSITE:
      return "py_callsite";
    default:
      return "unknown";
  }
}

const char* kCounterNames[] = {
    "dropped_full",        "sig_table_full",    "str_arena_full",  "event_pool_empty",
    "pending_full",        "cuda_error",        "symbol_missing",  "reentrant",
    "capture_skipped",     "launches_untraced", "records_written", "sampled",
    "daemon_connect_fail", "plugin_events",     "py_events",       "internal",
    "hold_timeout",        "uncovered"};

// Names are sanitised to printable ASCII by the reader; escape for JSON/CSV.
std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}
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
  enum { kText, kJson, kCsv } format = kText;
  bool records = true;
  uint64_t limit = 0;
  std::string path;
};

}  // namespace

int main(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      fputs(kHelp, stdout);
      return 0;
    } else if (a == "--json") {
      args.format = Args::kJson;
    } else if (a == "--csv") {
      args.format = Args::kCsv;
    } else if (a == "--no-records") {
      args.records = false;
    } else if (a == "--limit" && i + 1 < argc) {
      args.limit = strtoull(argv[++i], nullptr, 10);
    } else if (a.rfind("--limit=", 0) == 0) {
      args.limit = strtoull(a.c_str() + 8, nullptr, 10);
    } else if (!a.empty() && a[0] != '-' && args.path.empty()) {
      args.path = a;
    } else {
      fprintf(stderr, "xpu-ring-dump: bad argument '%s' (see --help)\n", a.c_str());
      return 2;
    }
  }
  if (args.path.empty()) {
    fputs(kHelp, stderr);
    return 2;
  }
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
  if (args.records) {
    reader.Poll(0, ~size_t{0}, &recs);
    reader.PollSignatures(&sigs);  // signatures read on demand for records
    if (args.limit != 0 && recs.size() > args.limit)
      recs.erase(recs.begin(), recs.end() - args.limit);
  }
  const auto& id = reader.identity();
  const auto& L = reader.layout();
  const auto live = reader.ReadLiveState();
  const auto& rc = reader.counters();

  if (args.format == Args::kJson) {
    printf(
        "{\"type\":\"header\",\"job\":\"%s\",\"job_name\":\"%s\",\"host\":\"%s\",\"pid\":%d,"
        "\"rank\":%d,"
        "\"local_rank\":%d,\"world_size\":%d,\"local_world_size\":%d,\"device\":%d,\"created_ns\":"
        "%" PRIu64 ",\"start_time_ticks\":%" PRIu64
        ",\"ring_capacity\":%u,\"sig_capacity\":%u,\"str_capacity\":%" PRIu64
        ",\"file_size\":%" PRIu64 ",\"write_index\":%" PRIu64 ",\"read_index\":%" PRIu64
        ",\"heartbeat_ns\":%" PRIu64 ",\"producer_state\":%u,\"timing_policy\":%u,\"counters\":{",
        JsonEscape(id.job).c_str(), JsonEscape(id.job_name).c_str(), JsonEscape(id.host).c_str(),
        id.pid, id.rank, id.local_rank, id.world_size, id.local_world_size, id.device,
        id.created_ns, id.start_time_ticks, L.ring_capacity, L.sig_capacity, L.str_capacity,
        L.file_size, live.write_index, live.read_index, live.heartbeat_ns, live.producer_state,
        live.timing_policy);
    for (size_t i = 0; i < sizeof(kCounterNames) / sizeof(kCounterNames[0]); ++i) {
      printf("%s\"%s\":%" PRIu64, i ? "," : "", kCounterNames[i], live.counters[i]);
    }
    printf("},\"reader\":{\"records\":%" PRIu64 ",\"corrupt\":%" PRIu64 ",\"lapped\":%" PRIu64
           ",\"uncommitted\":%" PRIu64 ",\"signatures\":%" PRIu64 ",\"signatures_corrupt\":%" PRIu64
           "}}\n",
           rc.records_read, rc.records_corrupt, rc.records_lapped, rc.records_abandoned,
           rc.signatures_read, rc.signatures_corrupt);
    for (const auto& s : sigs) {
      const auto& g = s.sig;
      printf(
          "{\"type\":\"signature\",\"id\":%u,\"kind\":\"%s\",\"kind_id\":%u,\"name\":\"%s\","
          "\"dtype\":%u,"
          "\"gemm_flags\":%u,\"m\":%u,\"n\":%u,\"k\":%u,\"batch\":%u,\"count\":%" PRIu64
          ",\"comm_id\":%" PRIu64
          ",\"comm_rank\":%d,\"comm_nranks\":%d,\"peer\":%d,\"device\":%d,\"flops\":%.0f,\"bytes\":"
          "%" PRIu64 "}\n",
          g.commit, KindName(g.kind), g.kind, JsonEscape(s.name).c_str(), g.dtype, g.gemm_flags,
          g.m, g.n, g.k, g.batch, g.count, g.comm_id, g.comm_rank, g.comm_nranks, g.peer, g.device,
          xpu_sig_flops(&g), xpu_sig_bytes(&g));
    }
    const CallsiteJoin join = JoinCallsites(reader, recs);
    for (size_t i = 0; i < recs.size(); ++i) {
      const RingRecord& r = recs[i];
      const SignatureInfo* s = reader.signature(r.rec.sig_id);
      printf("{\"type\":\"record\",\"position\":%" PRIu64
             ",\"sig_id\":%u,\"kind\":\"%s\",\"name\":\"%s\","
             "\"start_ns\":%" PRIu64 ",\"duration_ns\":%" PRIu64
             ",\"issue_latency_ns\":%d,\"seq\":%u,\"stream\":%u,"
             "\"flags\":%u,\"timed\":%s,\"flops\":%.0f,\"bytes\":%" PRIu64 ",\"comm_id\":%" PRIu64,
             r.position, r.rec.sig_id, s ? KindName(s->sig.kind) : "unknown",
             s ? JsonEscape(s->name).c_str() : "", r.rec.start_ns, xpu_record_duration_ns(&r.rec),
             r.rec.issue_latency_ns, r.rec.seq, r.rec.stream, r.rec.flags,
             (r.rec.flags & XPU_REC_TIMED) ? "true" : "false", s ? xpu_sig_flops(&s->sig) : 0.0,
             s ? xpu_sig_bytes(&s->sig) : 0, s ? s->sig.comm_id : 0);
      const uint32_t launch_sig = xpu_callsite_launch_sig_id(&r.rec);
      if (s != nullptr && s->sig.kind == XPU_OP_PY_CALLSITE && launch_sig != 0) {
        printf(",\"launch\":{\"sig_id\":%u,\"seq\":%u,\"stream\":%u,\"position\":", launch_sig,
               r.rec.seq, r.rec.stream);
        auto it = join.launch_of_link.find(i);
        if (it != join.launch_of_link.end()) {
          printf("%" PRIu64 "}", recs[it->second].position);
        } else {
          printf("null}");
        }
      }
      if (auto it = join.link_of_launch.find(i); it != join.link_of_launch.end()) {
        const uint32_t stack = recs[it->second].rec.sig_id;
        const SignatureInfo* cs = reader.signature(stack);
        printf(",\"callsite_sig_id\":%u,\"callsite\":\"%s\"", stack,
               cs ? JsonEscape(cs->name).c_str() : "");
      }
      printf("}\n");
    }
    return 0;
  }
  if (args.format == Args::kCsv) {
    printf(
        "position,sig_id,kind,name,start_ns,duration_ns,issue_latency_ns,seq,stream,flags,timed,"
        "flops,bytes,"
        "comm_id\n");
    for (const auto& r : recs) {
      const SignatureInfo* s = reader.signature(r.rec.sig_id);
      printf("%" PRIu64 ",%u,%s,%s,%" PRIu64 ",%" PRIu64 ",%d,%u,%u,%u,%d,%.0f,%" PRIu64 ",%" PRIu64
             "\n",
             r.position, r.rec.sig_id, s ? KindName(s->sig.kind) : "unknown",
             CsvEscape(s ? s->name : "").c_str(), r.rec.start_ns, xpu_record_duration_ns(&r.rec),
             r.rec.issue_latency_ns, r.rec.seq, r.rec.stream, r.rec.flags,
             (r.rec.flags & XPU_REC_TIMED) ? 1 : 0, s ? xpu_sig_flops(&s->sig) : 0.0,
             s ? xpu_sig_bytes(&s->sig) : 0, s ? s->sig.comm_id : 0);
    }
    return 0;
  }
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
    printf("  #%u %-13s %s", g.commit, KindName(g.kind), s.name.c_str());
    if (g.kind == XPU_OP_GEMM)
      printf("  m=%u n=%u k=%u batch=%u dtype=%u flops=%.0f", g.m, g.n, g.k, g.batch, g.dtype,
             xpu_sig_flops(&g));
    if (xpu_op_is_collective(g.kind)) {
      printf("  count=%" PRIu64 " dtype=%u comm=%" PRIx64 " rank=%d/%d peer=%d bytes=%" PRIu64,
             g.count, g.dtype, g.comm_id, g.comm_rank, g.comm_nranks, g.peer, xpu_sig_bytes(&g));
    }
    printf("\n");
  }
  if (args.records) {
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
  return 0;
}
