// EngineClient: routing of batches to engine replicas, buffering, parked
// jobs. The life of each stream is in engine_connection.cc.
#include "daemon/engine_client.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/base/clock.h"
#include "common/logging/logging.h"
#include "daemon/engine_connection.h"

namespace xpu::daemon {
namespace {

std::shared_ptr<spdlog::logger> Log() {
  static auto logger = logging::GetLogger("engine_client");
  return logger;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t RecordsIn(const xpu::v1::ProcessBatch& pb) {
  return pb.records().size() / sizeof(xpu_record_v1);
}

std::string JobOf(const xpu::v1::ProcessBatch& pb) {
  const xpu::v1::ProcessIdentity& id = pb.identity();
  // The engine's job id for a process without one (ingest_service.cc).
  return !id.job().empty() ? id.job() : absl::StrCat("pid-", id.pid(), "@", id.host());
}

// `from` with only the processes `keep` accepts (same seq and counters).
template <typename Keep>
xpu::v1::Batch Part(const xpu::v1::Batch& from, Keep keep) {
  xpu::v1::Batch out;
  out.set_batch_seq(from.batch_seq());
  out.set_sent_ns(from.sent_ns());
  for (const auto& pb : from.processes()) {
    if (keep(pb)) *out.add_processes() = pb;
  }
  return out;
}

// Moves the metadata of `from` (identity, signatures, exit) into `to`, in
// front of what `to` already carries for the same process.
void MergeMetadata(const xpu::v1::ProcessBatch& from, xpu::v1::Batch* to) {
  for (auto& pb : *to->mutable_processes()) {
    if (pb.process_key() != from.process_key()) continue;
    if (from.signatures_size() > 0) {
      google::protobuf::RepeatedPtrField<xpu::v1::Signature> merged(from.signatures());
      merged.MergeFrom(pb.signatures());
      pb.mutable_signatures()->Swap(&merged);
    }
    if (from.exited()) pb.set_exited(true);
    return;
  }
  xpu::v1::ProcessBatch* pb = to->add_processes();
  pb->set_process_key(from.process_key());
  *pb->mutable_identity() = from.identity();
  *pb->mutable_signatures() = from.signatures();
  *pb->mutable_counters() = from.counters();
  pb->set_exited(from.exited());
}

bool HasPayload(const xpu::v1::Batch& b) {
  for (const auto& pb : b.processes()) {
    if (!pb.records().empty() || pb.windows_size() > 0) return true;
  }
  return false;
}

}  // namespace

bool IsLoopbackTarget(const std::string& target) {
  std::string t = target;
  if (t.rfind("unix:", 0) == 0 || t.rfind("unix-abstract:", 0) == 0) return true;
  for (const char* scheme : {"dns:///", "dns:", "ipv4:", "ipv6:"}) {
    if (t.rfind(scheme, 0) == 0) {
      t = t.substr(strlen(scheme));
      // ipv4:/ipv6: lists of addresses: every one must stay on this host.
      if (t.find(',') != std::string::npos && scheme[0] == 'i') {
        const std::string prefix(scheme);
        for (absl::string_view a : absl::StrSplit(t, ',')) {
          if (a.empty() || !IsLoopbackTarget(prefix + std::string(a))) return false;
        }
        return true;
      }
      break;
    }
  }
  std::string host;
  if (!t.empty() && t[0] == '[') {
    const size_t end = t.find(']');
    if (end == std::string::npos) return false;
    host = t.substr(1, end - 1);
  } else {
    const size_t colon = t.find(':');
    host = colon == std::string::npos ? t : t.substr(0, colon);
    if (t.find(':', colon == std::string::npos ? 0 : colon + 1) != std::string::npos)
      host = t;  // bare IPv6
  }
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

absl::StatusOr<std::unique_ptr<EngineClient>> EngineClient::Create(
    const EngineClientOptions& options, CommandHandler* handler, StateProvider* state) {
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (!options.tls_ca_file.empty() || !options.tls_cert_file.empty() ||
      !options.tls_key_file.empty()) {
    if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
      return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
    }
    grpc::SslCredentialsOptions ssl;
    if (!options.tls_ca_file.empty()) {
      auto ca = ReadFile(options.tls_ca_file);
      if (!ca.ok()) return ca.status();
      ssl.pem_root_certs = *ca;
    }
    if (!options.tls_cert_file.empty()) {
      auto cert = ReadFile(options.tls_cert_file);
      if (!cert.ok()) return cert.status();
      auto key = ReadFile(options.tls_key_file);
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *cert;
      ssl.pem_private_key = *key;
    }
    creds = grpc::SslCredentials(ssl);
  } else if (IsLoopbackTarget(options.target) || options.insecure) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("refusing plaintext to non-loopback engine ", options.target,
                     ": give --tls-ca (and --tls-cert/--tls-key) or --insecure"));
  }
  return std::unique_ptr<EngineClient>(new EngineClient(options, std::move(creds), handler, state));
}

EngineClient::EngineClient(const EngineClientOptions& options,
                           std::shared_ptr<grpc::ChannelCredentials> creds, CommandHandler* handler,
                           StateProvider* state)
    : options_(options),
      creds_(std::move(creds)),
      handler_(handler),
      state_(state),
      incarnation_(RealtimeNs()),
      default_(std::make_unique<Conn>(options.target, /*is_default=*/true)) {}

EngineClient::~EngineClient() { Stop(); }

void EngineClient::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (running_) return;
  running_ = true;
  Conn* c = default_.get();
  c->thread = std::thread([this, c] { Run(c); });
  park_thread_ = std::thread([this] { ParkLoop(); });
}

void EngineClient::Stop() {
  std::vector<Conn*> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!running_) return;
    running_ = false;
    all.push_back(default_.get());
    for (auto& [a, c] : replicas_) all.push_back(c.get());
    for (auto& c : retired_) all.push_back(c.get());
    for (Conn* c : all) {
      c->stop = true;
      if (c->ctx != nullptr) c->ctx->TryCancel();
      c->cv.notify_all();
    }
  }
  park_cv_.notify_all();
  for (Conn* c : all) {
    if (c->thread.joinable()) c->thread.join();
  }
  if (park_thread_.joinable()) park_thread_.join();
}

EngineClientStats EngineClient::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineClientStats s = stats_;
  s.connected = default_->connected;
  auto add = [&](const Conn& c) {
    s.batches_buffered += c.pending.size();
    s.bytes_buffered += c.bytes;
    for (const Item& i : c.sent) s.batches_unacked += i.batch.processes_size() > 0;
  };
  add(*default_);
  for (const auto& [a, c] : replicas_) add(*c);
  s.replica_streams = replicas_.size();
  return s;
}

bool EngineClient::RoutedTo(const std::string& job, const Conn* c) const {
  if (parked_.count(job)) return false;
  auto it = routes_.find(job);
  if (it == routes_.end()) return c->is_default;
  return !c->is_default && it->second == c->target;
}

EngineClient::Conn* EngineClient::ConnFor(const std::string& job) {
  if (parked_.count(job)) return nullptr;
  auto it = routes_.find(job);
  if (it == routes_.end()) return default_.get();
  auto c = replicas_.find(it->second);
  if (c != replicas_.end()) return c->second.get();
  routes_.erase(it);
  return default_.get();
}

EngineClient::Conn* EngineClient::GetOrStartConn(const std::string& address) {
  auto& slot = replicas_[address];
  if (!slot) {
    slot = std::make_unique<Conn>(address, /*is_default=*/false);
    Conn* c = slot.get();
    if (running_) c->thread = std::thread([this, c] { Run(c); });
  }
  return slot.get();
}

void EngineClient::Push(Conn* c, xpu::v1::Batch batch) {
  const size_t bytes = batch.ByteSizeLong();
  c->pending.push_back(Item{std::move(batch), bytes});
  c->bytes += bytes;
  EnforceBudgetLocked(c);
  c->cv.notify_all();
}

void EngineClient::Enqueue(xpu::v1::Batch batch) {
  std::lock_guard<std::mutex> lock(mu_);
  batch.set_batch_seq(next_seq_++);
  // Parts by destination; most batches have one.
  std::map<Conn*, std::vector<int>> parts;
  std::map<std::string, std::vector<int>> parked;
  for (int i = 0; i < batch.processes_size(); ++i) {
    const std::string job = JobOf(batch.processes(i));
    if (Conn* c = ConnFor(job)) {
      parts[c].push_back(i);
    } else {
      parked[job].push_back(i);
    }
  }
  auto subset = [&](const std::vector<int>& idx) {
    xpu::v1::Batch out;
    out.set_batch_seq(batch.batch_seq());
    for (int i : idx) *out.add_processes() = batch.processes(i);
    return out;
  };
  if (parts.size() == 1 && parked.empty()) {
    Push(parts.begin()->first, std::move(batch));
    return;
  }
  for (const auto& [c, idx] : parts) Push(c, subset(idx));
  for (const auto& [job, idx] : parked) parked_[job].batches.push_back(subset(idx));
}

std::vector<xpu::v1::Batch> EngineClient::TakeJob(const std::string& job) {
  std::vector<xpu::v1::Batch> out;
  auto of_job = [&](const xpu::v1::ProcessBatch& pb) { return JobOf(pb) == job; };
  auto not_job = [&](const xpu::v1::ProcessBatch& pb) { return JobOf(pb) != job; };
  auto take = [&](Conn* c) {
    for (Item& it : c->sent) {
      xpu::v1::Batch mine = Part(it.batch, of_job);
      if (mine.processes_size() == 0) continue;
      out.push_back(std::move(mine));
      it.batch = Part(it.batch, not_job);  // stays, for the acknowledgement count
      c->bytes -= it.bytes;
      it.bytes = it.batch.ByteSizeLong();
      c->bytes += it.bytes;
    }
    std::deque<Item> keep;
    for (Item& it : c->pending) {
      xpu::v1::Batch mine = Part(it.batch, of_job);
      c->bytes -= it.bytes;
      if (mine.processes_size() > 0) out.push_back(std::move(mine));
      xpu::v1::Batch rest = Part(it.batch, not_job);
      if (rest.processes_size() == 0 && mine.processes_size() > 0) continue;
      const size_t bytes = rest.ByteSizeLong();
      c->bytes += bytes;
      keep.push_back(Item{std::move(rest), bytes});
    }
    c->pending.swap(keep);
  };
  take(default_.get());
  for (auto& [a, c] : replicas_) take(c.get());
  if (auto p = parked_.find(job); p != parked_.end()) {
    for (xpu::v1::Batch& b : p->second.batches) out.push_back(std::move(b));
    parked_.erase(p);
  }
  // batch_seq is global: sorting restores the order the batches were made in.
  std::stable_sort(out.begin(), out.end(), [](const xpu::v1::Batch& a, const xpu::v1::Batch& b) {
    return a.batch_seq() < b.batch_seq();
  });
  return out;
}

xpu::v1::Batch EngineClient::StateBatch(const std::string& job, const Conn* c) {
  xpu::v1::Batch b;
  b.set_batch_seq(0);
  if (state_ == nullptr) return b;
  for (auto& pb : state_->FullState()) {
    const std::string j = JobOf(pb);
    if (job.empty() ? RoutedTo(j, c) : j == job) *b.add_processes() = std::move(pb);
  }
  return b;
}

void EngineClient::MoveJob(const std::string& job, Conn* to) {
  std::vector<xpu::v1::Batch> batches = TakeJob(job);
  // The next replica gets the job's processes and signature tables first.
  xpu::v1::Batch state = StateBatch(job, to);
  std::set<uint64_t> in_state;
  for (const auto& pb : state.processes()) in_state.insert(pb.process_key());
  if (state.processes_size() > 0) Push(to, std::move(state));
  for (xpu::v1::Batch& b : batches) {
    if (b.batch_seq() == 0) {
      // An earlier state batch of the job (it moved before): the fresh one
      // above supersedes it for the processes that still live.
      b = Part(b, [&](const xpu::v1::ProcessBatch& pb) {
        return in_state.count(pb.process_key()) == 0;
      });
      if (b.processes_size() == 0) continue;
    }
    Push(to, std::move(b));
  }
}

void EngineClient::OnRedirect(Conn* from, const xpu::v1::JobRedirect& r) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!running_ || r.job().empty() || r.address().empty()) return;
  stats_.redirects++;
  if (!from->is_default && from->target == r.address()) return;  // itself: stale
  auto rt = routes_.find(r.job());
  if (rt != routes_.end() && rt->second == r.address() && replicas_.count(r.address())) {
    return;  // a repeat: the job's batches went there with the first one
  }
  Log()->info("job {} is served by engine replica {} at {}: its batches go there", r.job(),
              r.replica_id(), r.address());
  const uint64_t now = MonotonicNs();
  auto d = down_.find(r.address());
  if (d != down_.end() && now < d->second.until_ns) {
    // That replica could not be reached a moment ago: hold the job's
    // batches until it may be tried again (then they go to the configured
    // address, whose replica redirects again or takes the job).
    std::vector<xpu::v1::Batch> batches = TakeJob(r.job());
    routes_.erase(r.job());
    Parked& p = parked_[r.job()];
    p.until_ns = std::max(p.until_ns, d->second.until_ns);
    for (xpu::v1::Batch& b : batches) p.batches.push_back(std::move(b));
    park_cv_.notify_all();
    return;
  }
  routes_[r.job()] = r.address();
  MoveJob(r.job(), GetOrStartConn(r.address()));
}

void EngineClient::OnReplicaFailed(Conn* c) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = replicas_.find(c->target);
  if (it == replicas_.end() || it->second.get() != c) return;
  c->stop = true;
  Down& d = down_[c->target];
  d.pause_ms = d.pause_ms == 0 ? options_.replica_retry_initial_ms
                               : std::min(d.pause_ms * 2, options_.replica_retry_max_ms);
  d.until_ns = MonotonicNs() + d.pause_ms * 1000000ull;
  std::set<std::string> jobs;
  for (const auto& [job, addr] : routes_) {
    if (addr == c->target) jobs.insert(job);
  }
  for (const Item& i : c->sent) {
    for (const auto& pb : i.batch.processes()) jobs.insert(JobOf(pb));
  }
  for (const Item& i : c->pending) {
    for (const auto& pb : i.batch.processes()) jobs.insert(JobOf(pb));
  }
  Log()->warn("engine replica {} unreachable: {} job(s) back to {} (retry in {} ms)", c->target,
              jobs.size(), default_->target, d.pause_ms);
  for (const std::string& job : jobs) {
    routes_.erase(job);
    MoveJob(job, default_.get());
  }
  retired_.push_back(std::move(it->second));
  replicas_.erase(it);
  park_cv_.notify_all();
}

void EngineClient::ParkLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (running_) {
    // Retired streams' threads have returned (or are about to): join them.
    std::vector<std::unique_ptr<Conn>> done;
    done.swap(retired_);
    if (!done.empty()) {
      lock.unlock();
      for (auto& c : done) {
        if (c->thread.joinable()) c->thread.join();
      }
      done.clear();
      lock.lock();
      continue;
    }
    const uint64_t now = MonotonicNs();
    uint64_t next = UINT64_MAX;
    std::vector<std::string> due;
    for (const auto& [job, p] : parked_) {
      if (p.until_ns <= now) {
        due.push_back(job);
      } else {
        next = std::min(next, p.until_ns);
      }
    }
    for (const std::string& job : due) MoveJob(job, default_.get());
    if (!due.empty()) continue;
    if (next == UINT64_MAX) {
      park_cv_.wait(lock);
    } else {
      park_cv_.wait_for(lock, std::chrono::nanoseconds(next - now));
    }
  }
}

void EngineClient::EnforceBudgetLocked(Conn* c) {
  // Unacknowledged batches first: delivered already, they only lose their
  // replay (an empty item keeps the acknowledgement count).
  for (Item& it : c->sent) {
    if (c->bytes <= options_.buffer_bytes) return;
    if (it.batch.processes_size() == 0) continue;
    ++stats_.batches_unacked_forgotten;
    c->bytes -= it.bytes;
    it.batch.clear_processes();
    it.bytes = 0;
  }
  while (c->bytes > options_.buffer_bytes && !c->pending.empty()) {
    auto& [oldest, bytes] = c->pending.front();
    if (HasPayload(oldest)) {
      // Drop the bulky part: records and windows.
      ++stats_.batches_dropped;
      for (auto& pb : *oldest.mutable_processes()) {
        const size_t n = RecordsIn(pb);
        stats_.records_dropped += n;
        dropped_by_process_[pb.process_key()] += n;
        pb.clear_records();
        pb.clear_windows();
      }
      c->bytes -= bytes;
      bytes = oldest.ByteSizeLong();
      c->bytes += bytes;
      continue;
    }
    if (c->pending.size() == 1) break;  // metadata alone: nothing more to shed
    // Fold the remaining metadata into the next batch.
    xpu::v1::Batch meta = std::move(oldest);
    c->bytes -= bytes;
    c->pending.pop_front();
    auto& [next, next_bytes] = c->pending.front();
    for (const auto& pb : meta.processes()) MergeMetadata(pb, &next);
    c->bytes -= next_bytes;
    next_bytes = next.ByteSizeLong();
    c->bytes += next_bytes;
  }
}

void EngineClient::PrepareForSend(xpu::v1::Batch* batch) {
  batch->set_sent_ns(RealtimeNs());
  batch->set_batches_dropped(stats_.batches_dropped);
  batch->set_records_dropped(stats_.records_dropped);
  for (auto& pb : *batch->mutable_processes()) {
    auto it = dropped_by_process_.find(pb.process_key());
    if (it == dropped_by_process_.end()) continue;
    auto* cnt = pb.mutable_counters();
    cnt->set_records_dropped_daemon(cnt->records_dropped_daemon() + it->second);
  }
}

}  // namespace xpu::daemon
