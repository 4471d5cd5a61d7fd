// record_codec_bench — the compact record encoding (common/wire/record_codec.h)
// on batches shaped like real ones: bytes per record, encode and decode
// throughput, against raw 32-byte records and against zlib (what gRPC's
// per-message compression would do) on the same batches, and cut into the
// engine's ring chunks of 32 records.
//
// Batches come from xpu-sim's cluster model (tools/sim/cluster_model.h): one
// ProcessBatch per rank per training step, as the simulator and a daemon
// flushing once per step send them, with the commit word set to the ring
// position + 1 as the daemon sets it. Layouts: dp and tp8pp4, the hook's
// timing policies sampled and all.
//
//   record_codec_bench [--ranks N] [--windows W] [--repeat R]
//
// Figures only; nothing is asserted about speed. MB/s counts the raw bytes
// (32 per record) encoded or produced.
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/cli/flags.h"
#include "common/wire/record_codec.h"
#include "tools/sim/cluster_model.h"

namespace {

struct Args {
  int ranks = 64;
  int windows = 3;
  int repeat = 5;
};

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// One batch per rank per step, positions counted per rank from 0.
std::vector<std::vector<xpu_record_v1>> Batches(const std::string& layout, bool all_timed,
                                                const Args& a) {
  xpu::sim::ModelSpec m;
  m.ranks = a.ranks;
  m.ranks_per_host = 8;
  m.timing = all_timed ? xpu::sim::TimingPolicy::kAll : xpu::sim::TimingPolicy::kSampled;
  m.layout = *xpu::sim::ParseLayout(layout, m.ranks, m.ranks_per_host);
  xpu::sim::ClusterModel model(m);
  std::vector<std::vector<xpu_record_v1>> out;
  std::vector<uint64_t> pos(static_cast<size_t>(a.ranks), 0);
  uint64_t t = 1'780'000'000'000'000'000ull;
  for (int w = 0; w < a.windows; ++w) {
    model.RunWindow(w, t);
    t = model.clock_ns() + 1'000'000;
    for (int32_t r = 0; r < model.ranks(); ++r) {
      const std::vector<xpu_record_v1>& recs = model.Records(r);
      size_t from = 0;
      for (uint32_t end : model.StepEnds(r)) {
        std::vector<xpu_record_v1> b(recs.begin() + from, recs.begin() + end);
        for (xpu_record_v1& x : b) x.commit = static_cast<uint32_t>(++pos[static_cast<size_t>(r)]);
        if (!b.empty()) out.push_back(std::move(b));
        from = end;
      }
    }
  }
  return out;
}

void Run(const std::string& layout, bool all_timed, const Args& a) {
  const auto batches = Batches(layout, all_timed, a);
  uint64_t records = 0;
  for (const auto& b : batches) records += b.size();
  if (records == 0) return;
  const double raw_mb = static_cast<double>(records) * 32 / 1e6;

  std::vector<std::string> blobs(batches.size());
  uint64_t compact_bytes = 0;
  auto t0 = Clock::now();
  for (int k = 0; k < a.repeat; ++k) {
    for (size_t i = 0; i < batches.size(); ++i) {
      blobs[i].clear();
      xpu::wire::EncodeCompactRecords(batches[i].data(), batches[i].size(), &blobs[i]);
    }
  }
  auto t1 = Clock::now();
  for (const auto& s : blobs) compact_bytes += s.size();
  std::vector<xpu_record_v1> out;
  out.reserve(8192);
  bool ok = true;
  for (int k = 0; k < a.repeat; ++k) {
    for (size_t i = 0; i < blobs.size(); ++i) {
      out.clear();
      ok &= xpu::wire::DecodeCompactRecords(blobs[i], &out).ok();
      if (k == 0) ok &= std::memcmp(out.data(), batches[i].data(), out.size() * 32) == 0;
    }
  }
  auto t2 = Clock::now();

  // zlib level 1 (gRPC's gzip is level-default zlib; level 1 is its fastest).
  uint64_t zlib_bytes = 0;
  std::vector<Bytef> z(compressBound(8192 * 32));
  auto t3 = Clock::now();
  for (const auto& b : batches) {
    uLongf zn = static_cast<uLongf>(compressBound(b.size() * 32));
    if (z.size() < zn) z.resize(zn);
    compress2(z.data(), &zn, reinterpret_cast<const Bytef*>(b.data()), b.size() * 32, 1);
    zlib_bytes += zn;
  }
  auto t4 = Clock::now();

  // The engine's record rings keep full chunks of 32 records, each encoded
  // on its own (engine/state/job_state.h, RecordRing): each batch cut so.
  uint64_t chunk_bytes = 0;
  std::string chunk;
  for (const auto& b : batches) {
    for (size_t i = 0; i < b.size(); i += 32) {
      chunk.clear();
      xpu::wire::EncodeCompactRecords(b.data() + i, std::min<size_t>(32, b.size() - i), &chunk);
      chunk_bytes += chunk.size();
    }
  }

  const double n = static_cast<double>(records);
  std::printf(
      "%-7s %-7s batches %6zu records %9llu rec/batch %6.1f | raw 32.00 B/rec | compact %5.2f "
      "B/rec (x%.1f) encode %6.0f MB/s decode %6.0f MB/s%s | in chunks of 32 %5.2f B/rec | "
      "zlib-1 %5.2f B/rec (x%.1f) %5.0f MB/s\n",
      layout.c_str(), all_timed ? "all" : "sampled", batches.size(),
      static_cast<unsigned long long>(records), n / static_cast<double>(batches.size()),
      static_cast<double>(compact_bytes) / n, 32.0 * n / static_cast<double>(compact_bytes),
      raw_mb * a.repeat / Seconds(t0, t1), raw_mb * a.repeat / Seconds(t1, t2),
      ok ? "" : " ROUND TRIP FAILED", static_cast<double>(chunk_bytes) / n,
      static_cast<double>(zlib_bytes) / n, 32.0 * n / static_cast<double>(zlib_bytes),
      raw_mb / Seconds(t3, t4));
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"record_codec_bench: the compact record encoding on simulated batches"};
  xpu::flags::Configure(app, "record_codec_bench");
  app.add_option("--ranks", a.ranks, "ranks of the simulated job")->check(CLI::Range(32, 4096));
  app.add_option("--windows", a.windows, "windows simulated")->check(CLI::Range(1, 100));
  app.add_option("--repeat", a.repeat, "encode/decode passes timed")->check(CLI::Range(1, 1000));
  if (int rc = xpu::flags::ParseMain(app, argc, argv, 64); rc >= 0) return rc;
  for (const char* layout : {"dp", "tp8pp4"}) {
    for (bool all : {false, true}) Run(layout, all, a);
  }
  return 0;
}
