#include "daemon/engine_client.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "absl/strings/match.h"
#include "common/base/clock.h"
#include "common/logging/logging.h"
#include "common/rpc/address.h"
#include "common/rpc/local_identity.h"
#include "common/wire/record_codec.h"
#include "daemon/process_table.h"
#include "xpu/v1/ingest.grpc.pb.h"

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

// Appends `run` (newer than every run `runs` has) to `runs`, joining it to
// the last one when they are contiguous or when there are wire::kMaxShedRuns
// already (the last one's range then spans positions it has no record of).
void AddShedRun(const xpu::v1::ShedRun& run,
                google::protobuf::RepeatedPtrField<xpu::v1::ShedRun>* runs) {
  if (!runs->empty()) {
    xpu::v1::ShedRun& last = *runs->rbegin();
    if (last.end_position() == run.first_position() || runs->size() >= wire::kMaxShedRuns) {
      last.set_end_position(std::max(last.end_position(), run.end_position()));
      last.set_records(last.records() + run.records());
      return;
    }
  }
  *runs->Add() = run;
}

// The ring positions of the raw records `pb` carries (the commit word of
// the last one holds its position, Ingest's convention).
xpu::v1::ShedRun ShedRunOf(const xpu::v1::ProcessBatch& pb) {
  xpu::v1::ShedRun run;
  const uint64_t n = RecordsIn(pb);
  run.set_first_position(pb.first_position());
  run.set_records(n);
  uint32_t commit = 0;
  if (n > 0) {
    memcpy(&commit, pb.records().data() + (n - 1) * sizeof(xpu_record_v1), sizeof(commit));
  }
  run.set_end_position(commit != 0 ? PositionFromCommit(pb.first_position(), commit) + 1
                                   : pb.first_position() + n);
  return run;
}

// Moves the metadata of `from` (identity, signatures, exit, unconfirmed
// shed runs) into `to`, in front of what `to` already carries for the same
// process.
void MergeMetadata(const xpu::v1::ProcessBatch& from, xpu::v1::Batch* to) {
  for (auto& pb : *to->mutable_processes()) {
    if (pb.process_key() != from.process_key()) continue;
    if (from.signatures_size() > 0) {
      google::protobuf::RepeatedPtrField<xpu::v1::Signature> merged(from.signatures());
      merged.MergeFrom(pb.signatures());
      pb.mutable_signatures()->Swap(&merged);
    }
    if (from.unconfirmed_shed_size() > 0) {
      google::protobuf::RepeatedPtrField<xpu::v1::ShedRun> runs(from.unconfirmed_shed());
      for (const xpu::v1::ShedRun& r : pb.unconfirmed_shed()) AddShedRun(r, &runs);
      pb.mutable_unconfirmed_shed()->Swap(&runs);
    }
    if (from.exited()) pb.set_exited(true);
    pb.set_end_position(std::max(pb.end_position(), from.end_position()));
    return;
  }
  xpu::v1::ProcessBatch* pb = to->add_processes();
  pb->set_process_key(from.process_key());
  *pb->mutable_identity() = from.identity();
  *pb->mutable_signatures() = from.signatures();
  *pb->mutable_counters() = from.counters();
  *pb->mutable_unconfirmed_shed() = from.unconfirmed_shed();
  pb->set_exited(from.exited());
  pb->set_end_position(from.end_position());
}

bool HasPayload(const xpu::v1::Batch& b) {
  for (const auto& pb : b.processes()) {
    if (!pb.records().empty()) return true;
  }
  return false;
}

}  // namespace

// By resolution, never by spelling: "127.evil.example" may name a public
// address, and a plaintext stream to it would carry the token and records.
bool IsLoopbackTarget(const std::string& target) { return rpc::IsLoopback(target); }

std::vector<std::string> SplitEngineTargets(const std::string& target) {
  if (absl::StartsWith(target, "ipv4:") || absl::StartsWith(target, "ipv6:")) return {target};
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(target, ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (!part.empty()) out.emplace_back(part);
  }
  return out;
}

absl::StatusOr<std::unique_ptr<EngineClient>> EngineClient::Create(
    const EngineClientOptions& options, CommandHandler* handler, StateProvider* state) {
  const std::vector<std::string> targets = SplitEngineTargets(options.target);
  if (targets.empty()) return absl::InvalidArgumentError("--engine names no engine");
  std::shared_ptr<grpc::ChannelCredentials> creds;
  bool plaintext = false;
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
  } else {
    for (const std::string& t : targets) {
      if (!IsLoopbackTarget(t) && !options.insecure) {
        return absl::InvalidArgumentError(
            absl::StrCat("refusing plaintext to non-loopback engine ", t,
                         ": give --tls-ca (and --tls-cert/--tls-key) or --insecure"));
      }
    }
    creds = grpc::InsecureChannelCredentials();
    plaintext = true;
  }
  return std::unique_ptr<EngineClient>(
      new EngineClient(options, std::move(creds), plaintext, handler, state));
}

EngineClient::EngineClient(const EngineClientOptions& options,
                           std::shared_ptr<grpc::ChannelCredentials> creds, bool plaintext,
                           CommandHandler* handler, StateProvider* state)
    : options_(options),
      targets_(SplitEngineTargets(options.target)),
      plaintext_(plaintext),
      creds_(std::move(creds)),
      handler_(handler),
      state_(state) {}

EngineClient::~EngineClient() { Stop(); }

void EngineClient::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (running_) return;
  running_ = true;
  thread_ = std::thread([this] { Run(); });
}

void EngineClient::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!running_) return;
    running_ = false;
    if (current_ctx_ != nullptr) current_ctx_->TryCancel();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

EngineClientStats EngineClient::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  EngineClientStats s = stats_;
  s.batches_buffered = queue_.size();
  s.batches_unacked = unacked_.size();
  s.bytes_buffered = queue_bytes_;
  return s;
}

void EngineClient::Enqueue(xpu::v1::Batch batch) {
  std::vector<Loss> losses;
  {
    std::lock_guard<std::mutex> lock(mu_);
    batch.set_batch_seq(next_seq_++);
    NoteDefinitionsLocked(batch);
    const size_t bytes = batch.ByteSizeLong();
    queue_.emplace_back(std::move(batch), bytes);
    queue_bytes_ += bytes;
    EnforceBudgetLocked(&losses);
  }
  ReportLosses(losses);
  cv_.notify_all();
}

void EngineClient::NoteDefinitionsLocked(const xpu::v1::Batch& batch) {
  for (const auto& pb : batch.processes()) {
    xpu::v1::ProcessBatch& d = definitions_[pb.process_key()];
    d.set_process_key(pb.process_key());
    *d.mutable_identity() = pb.identity();
    for (const auto& sig : pb.signatures()) *d.add_signatures() = sig;
    if (pb.exited()) d.set_exited(true);
  }
}

void EngineClient::ReportLosses(const std::vector<Loss>& losses) {
  if (state_ == nullptr) return;
  for (const Loss& l : losses) state_->Lost(l.process_key, l.reason, l.records);
}

void EngineClient::HandleAck(const xpu::v1::BatchAck& ack) {
  std::vector<std::pair<uint64_t, uint64_t>> settled;  // process key, end position
  std::vector<Loss> losses;
  std::map<uint64_t, uint64_t> shed, held;  // process key -> unconfirmed records, held ones
  for (const auto& h : ack.shed_held()) held[h.process_key()] += h.records();
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (!unacked_.empty() && unacked_.front().first.batch_seq() <= ack.batch_seq()) {
      auto& [b, bytes] = unacked_.front();
      for (const auto& pb : b.processes()) {
        for (const auto& run : pb.unconfirmed_shed()) shed[pb.process_key()] += run.records();
        if (pb.end_position() > 0) settled.emplace_back(pb.process_key(), pb.end_position());
        // A process that has exited and has nothing left here needs no
        // more definitions.
        if (pb.exited()) definitions_.erase(pb.process_key());
      }
      queue_bytes_ -= bytes;
      unacked_.pop_front();
      ++stats_.batches_acked;
    }
    while (!released_shed_.empty() && released_shed_.begin()->first <= ack.batch_seq()) {
      for (const auto& [key, n] : released_shed_.begin()->second) shed[key] += n;
      released_shed_.erase(released_shed_.begin());
    }
    // Unconfirmed shed records: what the engine does not hold is lost.
    for (const auto& [key, n] : shed) {
      const uint64_t kept = std::min(n, held[key]);
      stats_.records_unconfirmed -= std::min(stats_.records_unconfirmed, n);
      stats_.records_shed_held += kept;
      stats_.records_dropped += n - kept;
      if (n > kept) losses.push_back(Loss{key, XPU_LOSS_BUFFER, n - kept});
    }
    for (const auto& r : ack.rejected()) {
      stats_.records_rejected += r.records();
      losses.push_back(Loss{r.process_key(), XPU_LOSS_REJECTED, r.records()});
    }
  }
  for (const auto& r : ack.rejected()) {
    Log()->warn("engine refused process key={} ({} records): {}", r.process_key(), r.records(),
                r.reason());
  }
  ReportLosses(losses);
  if (state_ != nullptr) {
    for (const auto& [key, end] : settled) state_->Acknowledged(key, end);
  }
  cv_.notify_all();
}

void EngineClient::HandleRedirect(const xpu::v1::JobRedirect& r) {
  // The engine ends the stream after this; the next connection goes there.
  if (r.address().empty()) return;
  if (plaintext_ && !options_.insecure && !IsLoopbackTarget(r.address())) {
    Log()->error("engine redirects job {} to {} without TLS, which is not loopback; not "
                 "followed (give --tls-ca or --insecure)",
                 r.job(), r.address());
    return;
  }
  Log()->info("job {} is served by engine replica {} at {}: moving there", r.job(),
              r.replica_id(), r.address());
  std::lock_guard<std::mutex> lock(mu_);
  redirect_ = r.address();
  ++stats_.redirects;
}

void EngineClient::EnforceBudgetLocked(std::vector<Loss>* losses) {
  // Written but unacknowledged batches first: the engine has them; keeping
  // them only guards against its crash.
  while (queue_bytes_ > options_.buffer_bytes && !unacked_.empty() &&
         unacked_.front().first.batch_seq() != in_flight_seq_) {
    for (const auto& pb : unacked_.front().first.processes()) {
      for (const auto& run : pb.unconfirmed_shed())
        released_shed_[unacked_.front().first.batch_seq()][pb.process_key()] += run.records();
    }
    queue_bytes_ -= unacked_.front().second;
    unacked_.pop_front();
    ++stats_.batches_released_unacked;
  }
  while (queue_bytes_ > options_.buffer_bytes && !queue_.empty()) {
    auto& [oldest, bytes] = queue_.front();
    if (HasPayload(oldest)) {
      // Drop the bulky part: records and windows. Records an engine may
      // have stored wait for an engine's word before they count as lost.
      ++stats_.batches_dropped;
      const bool maybe_stored = oldest.batch_seq() <= last_written_seq_;
      for (auto& pb : *oldest.mutable_processes()) {
        const size_t n = RecordsIn(pb);
        if (n > 0 && maybe_stored) {
          AddShedRun(ShedRunOf(pb), pb.mutable_unconfirmed_shed());
          stats_.records_unconfirmed += n;
        } else if (n > 0) {
          stats_.records_dropped += n;
          losses->push_back(Loss{pb.process_key(), XPU_LOSS_BUFFER, n});
        }
        pb.clear_records();
      }
      queue_bytes_ -= bytes;
      bytes = oldest.ByteSizeLong();
      queue_bytes_ += bytes;
      continue;
    }
    if (queue_.size() == 1) break;  // metadata alone: nothing more to shed
    // Fold the remaining metadata into the next batch.
    xpu::v1::Batch meta = std::move(oldest);
    queue_bytes_ -= bytes;
    queue_.pop_front();
    auto& [next, next_bytes] = queue_.front();
    for (const auto& pb : meta.processes()) MergeMetadata(pb, &next);
    queue_bytes_ -= next_bytes;
    next_bytes = next.ByteSizeLong();
    queue_bytes_ += next_bytes;
  }
}

void EngineClient::PrepareForSend(xpu::v1::Batch* batch) {
  batch->set_sent_ns(RealtimeNs());
  batch->set_batches_dropped(stats_.batches_dropped);
  batch->set_records_dropped(stats_.records_dropped);
}

uint64_t EngineClient::EncodeForSend(bool compact, xpu::v1::Batch* batch, bool* encoded) const {
  uint64_t bytes = 0;
  *encoded = false;
  for (xpu::v1::ProcessBatch& pb : *batch->mutable_processes()) {
    if (compact && wire::CompactProcessBatchRecords(&pb)) *encoded = true;
    bytes += pb.records().size() + pb.compact_records().size();
  }
  return bytes;
}

std::string EngineClient::NextTarget(bool* from_redirect) {
  *from_redirect = !redirect_.empty();
  if (*from_redirect) {
    std::string t = std::move(redirect_);
    redirect_.clear();
    return t;
  }
  return targets_[next_target_ % targets_.size()];
}

void EngineClient::Run() {
  uint64_t backoff_ms = options_.backoff_initial_ms;
  size_t failed_in_round = 0;   // failed attempts at the list's engines since a handshake
  int redirect_streak = 0;      // redirects since a stream that was not redirected
  for (;;) {
    std::string target;
    bool from_redirect = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!running_) return;
      target = NextTarget(&from_redirect);
    }
    const bool handshook = RunConnection(target);
    std::unique_lock<std::mutex> lock(mu_);
    stats_.connected = false;
    if (!running_) return;
    const bool redirected = !redirect_.empty();
    uint64_t wait_ms = backoff_ms;
    if (handshook) {
      backoff_ms = options_.backoff_initial_ms;
      failed_in_round = 0;
      wait_ms = backoff_ms;
      if (!redirected) redirect_streak = 0;
    } else {
      ++stats_.connect_failures;
      if (!from_redirect) {
        ++failed_in_round;
        next_target_ = (next_target_ + 1) % targets_.size();
      }
    }
    if (redirected || from_redirect || (!handshook && failed_in_round < targets_.size())) {
      // Toward the replica that serves the job, or to an engine of the list
      // not tried since the last handshake: soon, slower while redirects go
      // round (an owner that is gone keeps its lease a little longer).
      wait_ms = std::min<uint64_t>({100ull << std::min(redirect_streak, 5),
                                    options_.backoff_max_ms, 2000});
      if (redirected) ++redirect_streak;
    }
    cv_.wait_for(lock, std::chrono::milliseconds(wait_ms), [this] { return !running_; });
    if (!handshook && failed_in_round >= targets_.size()) {
      backoff_ms = std::min(backoff_ms * 2, options_.backoff_max_ms);
      failed_in_round = 0;
    }
  }
}

bool EngineClient::RunConnection(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  // A fresh channel per attempt: our backoff, not the channel's, paces retries.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel = grpc::CreateCustomChannel(target, creds_, args);
  auto stub = xpu::v1::Ingest::NewStub(channel);
  grpc::ClientContext ctx;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!running_) return false;
    current_ctx_ = &ctx;
    stats_.target = target;
    acked_ = accepted_ = compact_ = broken_ = false;
    // Whatever the previous engine did not acknowledge goes again, first,
    // with the runs of what was shed from it.
    in_flight_seq_ = 0;
    stats_.batches_resent += unacked_.size();
    while (!unacked_.empty()) {
      queue_.push_front(std::move(unacked_.back()));
      unacked_.pop_back();
    }
  }
  auto stream = stub->Stream(&ctx);
  std::thread reader([&] { ReadStream(stream.get()); });

  bool handshook = false;
  auto finish = [&]() {
    ctx.TryCancel();
    reader.join();
    const grpc::Status st = stream->Finish();
    std::lock_guard<std::mutex> lock(mu_);
    current_ctx_ = nullptr;
    if (!st.ok() && running_) {
      Log()->warn("engine stream to {} ended: {} {}", target,
                  static_cast<int>(st.error_code()), st.error_message());
    }
    return handshook;
  };
  if (!Handshake(stream.get(), target)) return finish();
  handshook = true;
  Log()->info("connected to engine {}", target);
  if (!Resync(stream.get())) return finish();
  SendUntilBroken(stream.get());
  return finish();
}

void EngineClient::QueueReply(xpu::v1::CommandReply reply) {
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.commands;
  replies_.push_back(std::move(reply));
  cv_.notify_all();
}

void EngineClient::ReadStream(Stream* stream) {
  xpu::v1::EngineMessage msg;
  while (stream->Read(&msg)) {
    if (msg.has_ack()) {
      std::lock_guard<std::mutex> lock(mu_);
      acked_ = true;
      accepted_ = msg.ack().accepted();
      compact_ = options_.compact_records && msg.ack().compact_records();
      if (!accepted_) Log()->error("engine refused this daemon: {}", msg.ack().reason());
    } else if (msg.has_batch_ack()) {
      HandleAck(msg.batch_ack());
      continue;
    } else if (msg.has_redirect()) {
      HandleRedirect(msg.redirect());
    } else if (msg.has_command()) {
      // Long commands answer later (the reply joins the queue then); the
      // reader goes straight back to the stream.
      if (handler_ != nullptr &&
          handler_->HandleCommandAsync(
              msg.command(), [this](xpu::v1::CommandReply r) { QueueReply(std::move(r)); })) {
        continue;
      }
      xpu::v1::CommandReply reply;
      reply.set_command_id(msg.command().command_id());
      if (handler_ != nullptr) {
        handler_->HandleCommand(msg.command(), &reply);
      } else {
        reply.set_ok(false);
        reply.set_error("no command handler");
      }
      QueueReply(std::move(reply));
    }
    cv_.notify_all();
  }
  std::lock_guard<std::mutex> lock(mu_);
  broken_ = true;
  cv_.notify_all();
}

bool EngineClient::Handshake(Stream* stream, const std::string& target) {
  xpu::v1::DaemonMessage hello_msg;
  auto* hello = hello_msg.mutable_hello();
  hello->set_protocol_version(1);
  hello->set_daemon_id(options_.daemon_id);
  hello->set_host(options_.host);
  hello->set_pid(static_cast<uint32_t>(getpid()));
  hello->set_version(options_.version);
  if (!options_.token.empty()) {
    hello->set_token(options_.token);
  } else if (absl::StatusOr<std::string> local = rpc::FetchLocalIdentity(
                 target, static_cast<int>(std::min<uint64_t>(options_.ack_timeout_ms, 2000)));
             local.ok()) {
    // An engine on this host names our uid itself (its identity socket); a
    // new token for every connection, since a restarted engine knows none.
    hello->set_token(*local);
  }
  if (!stream->Write(hello_msg)) return false;
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(options_.ack_timeout_ms),
               [this] { return acked_ || broken_ || !running_; });
  if (!acked_ || !accepted_ || !running_) return false;
  ++stats_.connects;
  stats_.connected = true;
  return true;
}

bool EngineClient::Resync(Stream* stream) {
  xpu::v1::DaemonMessage resync;
  std::set<uint64_t> keys;
  if (state_ != nullptr) {
    for (auto& pb : state_->FullState()) {
      keys.insert(pb.process_key());
      *resync.mutable_batch()->add_processes() = std::move(pb);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Processes gone from the table whose last batches still wait here.
    for (const auto& [key, d] : definitions_) {
      if (!keys.count(key)) *resync.mutable_batch()->add_processes() = d;
    }
    resync.mutable_batch()->set_batch_seq(0);
    PrepareForSend(resync.mutable_batch());
  }
  if (resync.batch().processes_size() == 0) return true;
  bool compact = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    compact = compact_;
  }
  bool encoded = false;
  const uint64_t bytes = EncodeForSend(compact, resync.mutable_batch(), &encoded);
  if (!stream->Write(resync)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  stats_.record_bytes_sent += bytes;
  if (encoded) ++stats_.batches_compact;
  return true;
}

void EngineClient::SendUntilBroken(Stream* stream) {
  auto last_write = std::chrono::steady_clock::now();
  for (;;) {
    xpu::v1::DaemonMessage out;
    bool have_batch = false;
    bool compact = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_until(lock, last_write + std::chrono::milliseconds(options_.heartbeat_ms), [this] {
        return !running_ || broken_ || !replies_.empty() || !queue_.empty();
      });
      if (!running_ || broken_) break;
      if (!replies_.empty()) {
        *out.mutable_reply() = std::move(replies_.front());
        replies_.pop_front();
      } else if (!queue_.empty()) {
        // Unacknowledged from here: the engine may store it and acknowledge
        // it before the write returns. A failed write ends the stream, and
        // the next one sends every unacknowledged batch again, so nothing
        // is lost; the budget enforcer does not release it while it is
        // being written.
        *out.mutable_batch() = queue_.front().first;
        last_written_seq_ = std::max(last_written_seq_, out.batch().batch_seq());
        in_flight_seq_ = out.batch().batch_seq();
        unacked_.push_back(std::move(queue_.front()));
        queue_.pop_front();
        PrepareForSend(out.mutable_batch());
        have_batch = true;
        compact = compact_;
      } else {
        out.mutable_heartbeat()->set_now_ns(RealtimeNs());
      }
    }
    // Encoded on the copy outside mu_: the queued batch stays raw for a
    // resend to an engine that may not read the compact form.
    bool encoded = false;
    const uint64_t record_bytes =
        have_batch ? EncodeForSend(compact, out.mutable_batch(), &encoded) : 0;
    if (!stream->Write(out)) {
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_seq_ = 0;
      break;
    }
    last_write = std::chrono::steady_clock::now();
    if (have_batch) {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.record_bytes_sent += record_bytes;
      if (encoded) ++stats_.batches_compact;
      in_flight_seq_ = 0;
      ++stats_.batches_sent;
    }
  }
}

}  // namespace xpu::daemon
