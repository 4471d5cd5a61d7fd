// ingest_bench — how many records per second (and per engine CPU core) the
// engine's ingest path takes through the real gRPC stack.
//
// The engine runs in a child process (forked before any gRPC state exists),
// so its CPU time can be read from /proc/<pid>/stat without counting the load
// generator. N daemon streams each send ProcessBatches of 4096 packed records
// for R ranks (signatures once per rank, then records only): 70 % kernels,
// 20 % GEMMs, 10 % allreduce with advancing per-communicator seq, so the
// collective table does real work.
//
//   ingest_bench [--seconds S] [--streams N] [--ranks R] [--records N]
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/cli/flags.h"
#include "common/logging/logging.h"
#include "engine/engine.h"
#include "engine/state/batch_builder.h"
#include "engine/testing/fake_daemon.h"
#include "xpu/v1/common.pb.h"
#include "xpu/v1/ingest.grpc.pb.h"
#include "xpu/v1/query.grpc.pb.h"

namespace {

using xpu::engine::AppendRecords;
using xpu::engine::MakeRecord;

struct Args {
  double seconds = 5;
  int streams = 4;
  int ranks = 8;
  int records = 4096;
};

// utime + stime of a process in seconds.
double CpuSeconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(f, line);
  size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::vector<std::string> fields;
  size_t pos = close + 2;
  while (pos < line.size()) {
    size_t sp = line.find(' ', pos);
    if (sp == std::string::npos) sp = line.size();
    fields.push_back(line.substr(pos, sp - pos));
    pos = sp + 1;
  }
  // fields[0] is state (field 3); utime is field 14, stime field 15.
  if (fields.size() < 13) return 0;
  return (std::strtod(fields[11].c_str(), nullptr) + std::strtod(fields[12].c_str(), nullptr)) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

[[noreturn]] void RunEngineChild(int port_fd, int control_fd) {
  xpu::engine::EngineOptions o;
  o.listen = "127.0.0.1:0";
  o.metrics_addr = "off";
  o.db = "/tmp/xpu_ingest_bench_" + std::to_string(getpid()) + ".db";
  o.window_s = 1;
  (void)xpu::logging::InitLogging({"ingest_bench-engine", "warn", /*file=*/""});
  auto e = xpu::engine::Engine::Start(o);
  int port = e.ok() ? (*e)->port() : 0;
  if (!e.ok()) std::fprintf(stderr, "engine: %s\n", std::string(e.status().message()).c_str());
  (void)!write(port_fd, &port, sizeof(port));
  char c;
  while (read(control_fd, &c, 1) > 0) {
  }
  if (e.ok()) (*e)->Shutdown();
  std::remove(o.db.c_str());
  std::remove((o.db + "-wal").c_str());
  std::remove((o.db + "-shm").c_str());
  _exit(0);
}

struct StreamResult {
  uint64_t records = 0;
  uint64_t batches = 0;
  bool ok = true;
  std::string error;
};

void RunStream(int port, int stream_id, const Args& a, std::atomic<bool>& stop, StreamResult* res) {
  grpc::ChannelArguments ch_args;
  ch_args.SetInt("xpu.bench.stream", stream_id);  // distinct args: own connection
  ch_args.SetMaxSendMessageSize(64 << 20);
  auto channel = xpu::engine::testing::TestChannel(port, std::nullopt, ch_args);
  auto stub = xpu::v1::Ingest::NewStub(channel);
  grpc::ClientContext ctx;
  auto stream = stub->Stream(&ctx);
  stream->Write(xpu::engine::MakeHello("bench-" + std::to_string(stream_id), "bench-host", 1,
                                       xpu::engine::testing::LocalToken(port)));
  xpu::v1::EngineMessage ack;
  if (!stream->Read(&ack) || !ack.ack().accepted()) {
    res->ok = false;
    res->error = "hello not accepted";
    return;
  }
  // The engine acknowledges every batch: read them as a daemon does, or its
  // writes stall on flow control.
  std::thread acks([&stream] {
    xpu::v1::EngineMessage m;
    while (stream->Read(&m)) {
    }
  });
  // One message per rank; signatures only in the first round.
  std::vector<xpu::v1::DaemonMessage> first(a.ranks), rest(a.ranks);
  std::vector<std::vector<size_t>> coll_offsets(a.ranks);
  const uint64_t comm_id = 0x1000 + stream_id;
  for (int r = 0; r < a.ranks; ++r) {
    xpu::v1::ProcessBatch pb;
    xpu::engine::SetIdentity(&pb, "bench-job", stream_id * a.ranks + r, "bench-host",
                             10000 + stream_id * a.ranks + r);
    std::vector<xpu_record_v1> recs;
    recs.reserve(a.records);
    uint64_t t = 1700000000000000000ull;
    for (int i = 0; i < a.records; ++i) {
      int mix = i % 10;
      uint32_t sig = mix < 7 ? 1 + (i % 5) : mix < 9 ? 6 + (i % 3) : 9;
      if (sig == 9) coll_offsets[r].push_back(static_cast<size_t>(i));
      recs.push_back(MakeRecord(sig, t, 20000 + (i % 1000), static_cast<uint32_t>(i),
                                XPU_REC_TIMED | XPU_REC_ISSUE_LAT_VALID));
      t += 25000;
    }
    AppendRecords(&pb, recs);
    *rest[r].mutable_batch()->add_processes() = pb;
    for (uint32_t k = 1; k <= 5; ++k)
      *pb.add_signatures() = xpu::engine::MakeKernelSignature(k, "kernel_" + std::to_string(k));
    for (uint32_t g = 6; g <= 8; ++g)
      *pb.add_signatures() = xpu::engine::MakeGemmSignature(g, 4096, 4096 * (g - 5), 4096);
    *pb.add_signatures() = xpu::engine::MakeCollectiveSignature(9, XPU_OP_ALLREDUCE, 1 << 24,
                                                                XPU_DT_BF16, comm_id, r, a.ranks);
    *first[r].mutable_batch()->add_processes() = pb;
  }
  uint64_t seq_base = 1;
  uint64_t batch_seq = 0;
  bool first_round = true;
  while (!stop.load(std::memory_order_relaxed)) {
    for (int r = 0; r < a.ranks; ++r) {
      xpu::v1::DaemonMessage& m = first_round ? first[r] : rest[r];
      // Advance the collective seq like a training loop would.
      std::string* blob = m.mutable_batch()->mutable_processes(0)->mutable_records();
      uint32_t seq = static_cast<uint32_t>(seq_base);
      for (size_t off : coll_offsets[r]) {
        std::memcpy(&(*blob)[off * 32 + offsetof(xpu_record_v1, seq)], &seq, 4);
        ++seq;
      }
      m.mutable_batch()->set_batch_seq(++batch_seq);
      if (!stream->Write(m)) {
        res->ok = false;
        res->error = "write failed";
        stop = true;
        break;
      }
      res->records += static_cast<uint64_t>(a.records);
      ++res->batches;
    }
    seq_base += coll_offsets[0].size();
    first_round = false;
  }
  stream->WritesDone();
  acks.join();
  grpc::Status st = stream->Finish();
  if (!st.ok()) {
    res->ok = false;
    res->error = st.error_message();
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app(
      "ingest_bench: records per second (and per engine CPU core) through the engine's ingest "
      "path over real gRPC. Prints figures; never asserts speed.");
  xpu::flags::Configure(app, "ingest_bench");
  app.add_option("--seconds", a.seconds, "how long to load the engine")
      ->type_name("S")
      ->check(xpu::flags::PositiveNumber());
  app.add_option("--streams", a.streams, "daemon streams")
      ->type_name("N")
      ->transform(xpu::flags::UnsignedAtLeast(1));
  app.add_option("--ranks", a.ranks, "ranks per stream")
      ->type_name("R")
      ->transform(xpu::flags::UnsignedAtLeast(1));
  app.add_option("--records", a.records, "records per batch")
      ->type_name("N")
      ->transform(xpu::flags::UnsignedAtLeast(1));
  if (int rc = xpu::flags::ParseMain(app, argc, argv, 64); rc >= 0) return rc;
  int port_pipe[2], control_pipe[2];
  if (pipe(port_pipe) != 0 || pipe(control_pipe) != 0) return 1;
  pid_t child = fork();
  if (child < 0) return 1;
  if (child == 0) {
    close(port_pipe[0]);
    close(control_pipe[1]);
    RunEngineChild(port_pipe[1], control_pipe[0]);
  }
  close(port_pipe[1]);
  close(control_pipe[0]);
  int port = 0;
  if (read(port_pipe[0], &port, sizeof(port)) != sizeof(port) || port == 0) {
    std::fprintf(stderr, "ingest_bench: engine did not start\n");
    return 1;
  }

  std::atomic<bool> stop{false};
  std::vector<StreamResult> results(a.streams);
  std::vector<std::thread> threads;
  const double cpu0 = CpuSeconds(child);
  const auto t0 = std::chrono::steady_clock::now();
  for (int s = 0; s < a.streams; ++s) {
    threads.emplace_back(RunStream, port, s, std::cref(a), std::ref(stop), &results[s]);
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(a.seconds));
  stop = true;
  for (auto& t : threads) t.join();  // Finish() returns once the engine consumed everything
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = CpuSeconds(child) - cpu0;

  // What the engine says it ingested.
  auto query = xpu::v1::Query::NewStub(
      xpu::engine::testing::TestChannel(port));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  xpu::v1::StatusReply status;
  grpc::Status qs = query->Status(&ctx, xpu::v1::StatusRequest(), &status);

  close(control_pipe[1]);
  int wstatus = 0;
  waitpid(child, &wstatus, 0);

  uint64_t sent = 0, batches = 0;
  for (const auto& r : results) {
    sent += r.records;
    batches += r.batches;
    if (!r.ok) std::fprintf(stderr, "stream error: %s\n", r.error.c_str());
  }
  const uint64_t ingested = qs.ok() ? status.records_total() : 0;
  const double rps = ingested / wall;
  const double per_core = cpu > 0 ? ingested / cpu : 0;
  std::printf(
      "ingest_bench: %d streams x %d ranks, %d records per ProcessBatch, %.2f s wall, %u cpus\n",
      a.streams, a.ranks, a.records, wall, std::thread::hardware_concurrency());
  std::printf("  sent %llu records in %llu batches; engine ingested %llu records\n",
              static_cast<unsigned long long>(sent), static_cast<unsigned long long>(batches),
              static_cast<unsigned long long>(ingested));
  std::printf("  records/s            %12.0f\n", rps);
  std::printf("  batches/s            %12.0f\n", batches / wall);
  std::printf("  engine cpu           %12.2f s (%.2f cores)\n", cpu, cpu / wall);
  std::printf("  records/s/core       %12.0f   (goal 5000000: %.2fx)\n", per_core, per_core / 5e6);
  std::printf("engine ingested %llu records\n", static_cast<unsigned long long>(ingested));
  if (!qs.ok()) std::fprintf(stderr, "status query failed: %s\n", qs.error_message().c_str());
  return ingested > 0 ? 0 : 1;
}
