#include "daemon/collector.h"

#include <algorithm>
#include <cstring>
#include <future>

#include "absl/strings/str_cat.h"
#include "common/logging/logging.h"
#include "daemon/evidence/evidence_collector.h"
#include "daemon/evidence/ring_progress.h"

namespace xpu::daemon {
namespace {

std::shared_ptr<spdlog::logger> Log() {
  static auto logger = logging::GetLogger("collector");
  return logger;
}

void AppendPacked(const xpu_record_v1& rec, std::string* out) {
  const size_t at = out->size();
  out->resize(at + sizeof(rec));
  memcpy(&(*out)[at], &rec, sizeof(rec));
}

// For the engine: the commit word carries the record's position in the
// process's stream (common.proto, ProcessBatch), so a record sent twice is
// recognized. The sequence, not the raw ring index: after corrupted indices
// the index may move back, and the engine would take every later record for
// one it already has.
void AppendWithPosition(const ring::RingRecord& r, std::string* out) {
  xpu_record_v1 rec = r.rec;
  rec.commit = static_cast<uint32_t>(r.sequence + 1);
  AppendPacked(rec, out);
}

uint32_t CommitAt(const std::string& packed, size_t offset) {
  uint32_t commit = 0;
  memcpy(&commit, packed.data() + offset, sizeof(commit));
  return commit;
}

}  // namespace

bool CallerMayAct(const xpu::v1::Command& command, uint32_t uid, bool engine_actions,
                  std::string* why) {
  if (!command.has_caller()) {
    *why = "command names no caller";
    return false;
  }
  const xpu::v1::CommandCaller& c = command.caller();
  if (c.engine()) {
    if (engine_actions) return true;
    *why = "this daemon does not act on the engine's automatic commands";
    return false;
  }
  if (c.all_jobs()) return true;
  if (c.uid() >= 0 && static_cast<uint64_t>(c.uid()) == uid) return true;
  *why = absl::StrCat(c.name().empty() ? "the caller" : c.name(),
                      " may not act on a process of uid ", uid);
  return false;
}

Collector::Collector(const CollectorOptions& options)
    : options_(options),
      table_(options.table),
      profiles_(std::make_unique<ProfileRunner>(this, options.profile)) {}

absl::StatusOr<uint64_t> Collector::AddRing(std::unique_ptr<ring::RingReader> reader,
                                            const PeerInfo& peer, uint64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  const ring::RingIdentity id = reader->identity();
  auto key = table_.Add(std::move(reader), peer, now_ns);
  if (key.ok()) {
    Log()->info("registered process key={} job={} rank={} pid={} peer_pid={} uid={}", *key, id.job,
                id.rank, id.pid, peer.pid, peer.uid);
  }
  return key;
}

void Collector::MarkDisconnected(uint64_t key, uint64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  ProcessState* s = table_.Find(key);
  if (s == nullptr || s->disconnected) return;
  s->disconnected = true;
  s->disconnected_at_ns = now_ns;
  Log()->info("process key={} job={} rank={} disconnected; draining", key, s->identity.job,
              s->identity.rank);
}

void Collector::DrainProcess(ProcessState& s, uint64_t now_ns) {
  if (s.reader == nullptr || s.exited) return;
  ring::RingReader& reader = *s.reader;
  const uint64_t bad_before = reader.counters().LostTotal();
  scratch_records_.clear();
  reader.Poll(now_ns, options_.max_records_per_poll, &scratch_records_);
  scratch_sigs_.clear();
  reader.PollSignatures(&scratch_sigs_);
  for (ring::SignatureInfo& sig : scratch_sigs_) s.signatures.push_back(std::move(sig));
  for (const ring::RingRecord& r : scratch_records_) {
    if (s.profile != nullptr) s.profile->Add(r.rec);
    if (r.rec.flags & XPU_REC_PROFILE_WINDOW) {
      // Kernel activity of a profiling window: summarized on the node
      // (profile_window.h); kept out of the history, the windows and the
      // engine stream, which it would flood.
      if (s.profile == nullptr) ++records_profile_unclaimed_;
      continue;
    }
    s.history.Push(r);
    if (options_.collect_for_engine) {
      if (s.pending_records.empty()) s.pending_first_position = r.sequence;
      AppendWithPosition(r, &s.pending_records);
    }
  }
  const uint64_t bad_after = reader.counters().LostTotal();
  uint64_t suppressed = 0;
  if (bad_after != bad_before && bad_limiter_.Allow(now_ns, &suppressed)) {
    const ring::RingReaderCounters& c = reader.counters();
    Log()->warn(
        "process key={} job={} rank={}: {} records lost (so far corrupt={} lapped={} "
        "abandoned={} resync={} ({} resyncs) restart={}; {} similar messages suppressed)",
        s.key, s.identity.job, s.identity.rank, bad_after - bad_before, c.records_corrupt,
        c.records_lapped, c.records_abandoned, c.records_resync, c.resyncs, c.records_restart,
        suppressed);
  }
  if (options_.collect_for_engine) {
    const size_t max_bytes = options_.max_pending_records * sizeof(xpu_record_v1);
    if (s.pending_records.size() > max_bytes) {
      const size_t drop = s.pending_records.size() - max_bytes;
      const uint64_t n = drop / sizeof(xpu_record_v1);
      reader.AddLoss(XPU_LOSS_BUFFER, reader.PositionOfSequence(s.pending_first_position), n);
      s.pending_records.erase(0, drop);
      s.pending_first_position =
          PositionFromCommit(s.pending_first_position, CommitAt(s.pending_records, 0));
      records_dropped_pending_ += n;
    }
  } else {
    // Nobody downstream: what was read is settled.
    reader.Acknowledge(reader.cursor());
  }
  if (reader.truncated() && !s.truncation_logged) {
    // The ring file was truncated under its header: the hook goes on (its
    // lost pages are private now) and every record it writes is counted.
    s.truncation_logged = true;
    Log()->warn("process key={} job={} rank={}: ring file truncated; its records are counted "
                "as ring_truncated from now on",
                s.key, s.identity.job, s.identity.rank);
  }
  if (reader.faulted() && !s.disconnected) {
    // The producer shrank its ring, header page included: nothing more can
    // be read or counted from it.
    s.disconnected = true;
    s.disconnected_at_ns = now_ns;
    Log()->warn("process key={} job={} rank={}: ring lost its pages (file shrunk); closing it",
                s.key, s.identity.job, s.identity.rank);
  }
  // Liveness: a process that vanished without closing its socket (or whose
  // pid now belongs to someone else) is treated like a closed connection.
  if (!s.disconnected && s.peer.pid > 0 &&
      now_ns - s.last_liveness_check_ns >= options_.liveness_interval_ns) {
    s.last_liveness_check_ns = now_ns;
    const uint64_t ticks = ReadProcStartTicks(s.peer.pid);
    if (ticks == 0 || (s.peer.start_ticks != 0 && ticks != s.peer.start_ticks)) {
      s.disconnected = true;
      s.disconnected_at_ns = now_ns;
      Log()->info("process key={} pid={} is gone; draining", s.key, s.peer.pid);
    }
  }
  bool finish = false;
  if (s.disconnected) {
    finish = reader.Drained() || now_ns - s.disconnected_at_ns >= options_.drain_timeout_ns;
  }
  if (finish) {
    s.exited = true;
    s.exited_at_ns = now_ns;
    const ring::RingReaderCounters& c = reader.counters();
    Log()->info("process key={} job={} rank={} exited: read={} corrupt={} lapped={} abandoned={}",
                s.key, s.identity.job, s.identity.rank, c.records_read, c.records_corrupt,
                c.records_lapped, c.records_abandoned);
  }
}

size_t Collector::DrainOnce(uint64_t now_ns) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t read = 0;
  table_.ForEach([&](ProcessState& s) {
    const uint64_t before = s.reader ? s.reader->counters().records_read : 0;
    DrainProcess(s, now_ns);
    if (s.reader) read += s.reader->counters().records_read - before;
  });
  table_.RemoveExited(now_ns, options_.retain_exited_ns);
  return read;
}

std::vector<xpu::v1::Batch> Collector::TakeBatches() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<xpu::v1::Batch> out;
  out.emplace_back();
  size_t bytes = 0;
  auto next_message = [&](size_t adding) {
    if (bytes > 0 && bytes + adding > options_.max_batch_bytes) {
      out.emplace_back();
      bytes = 0;
    }
    bytes += adding;
    return out.back().add_processes();
  };
  const size_t chunk =
      std::max<size_t>(1, options_.max_records_per_message) * sizeof(xpu_record_v1);
  table_.ForEach([&](ProcessState& s) {
    if (s.exit_reported || s.reader == nullptr) return;
    size_t offset = 0;
    bool first = true;
    do {
      const size_t len = std::min(chunk, s.pending_records.size() - offset);
      xpu::v1::ProcessBatch* pb = next_message(len + 512);
      pb->set_process_key(s.key);
      FillIdentity(s, pb->mutable_identity());
      if (first) {
        for (size_t i = s.signatures_sent; i < s.signatures.size(); ++i)
          FillSignature(s.signatures[i], pb->add_signatures());
        s.signatures_sent = s.signatures.size();
        first = false;
      }
      pb->set_records(s.pending_records.substr(offset, len));
      pb->set_first_position(
          len == 0 ? s.reader->records_accounted()
                   : PositionFromCommit(s.pending_first_position,
                                        CommitAt(s.pending_records, offset)));
      FillCounters(s, pb->mutable_counters());
      offset += len;
      const bool last = offset >= s.pending_records.size();
      // Every position below the cursor is in this or an earlier batch, or
      // was counted lost: the engine's acknowledgement settles them.
      if (last) pb->set_end_position(s.reader->cursor());
      if (last && s.exited) {
        pb->set_exited(true);
        s.exit_reported = true;
      }
    } while (offset < s.pending_records.size());
    s.pending_records.clear();
  });
  if (out.back().processes_size() == 0) out.pop_back();
  return out;
}

std::vector<xpu::v1::ProcessBatch> Collector::FullState() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<xpu::v1::ProcessBatch> out;
  table_.ForEach([&](ProcessState& s) {
    if (s.reader == nullptr) return;
    xpu::v1::ProcessBatch pb;
    pb.set_process_key(s.key);
    FillIdentity(s, pb.mutable_identity());
    // Only the prefix already handed out: later ones follow as deltas. Also
    // for a process whose exit was reported: batches of its last records may
    // still wait in the engine client's buffer, and a restarted engine must
    // know their signatures.
    for (size_t i = 0; i < s.signatures_sent; ++i)
      FillSignature(s.signatures[i], pb.add_signatures());
    FillCounters(s, pb.mutable_counters());
    pb.set_exited(s.exit_reported);
    out.push_back(std::move(pb));
  });
  return out;
}

void Collector::Acknowledged(uint64_t process_key, uint64_t end_position) {
  std::lock_guard<std::mutex> lock(mu_);
  ProcessState* s = table_.Find(process_key);
  if (s != nullptr && s->reader != nullptr) s->reader->Acknowledge(end_position);
}

void Collector::Lost(uint64_t process_key, xpu_consumer_loss reason, uint64_t records) {
  std::lock_guard<std::mutex> lock(mu_);
  ProcessState* s = table_.Find(process_key);
  if (s != nullptr && s->reader != nullptr) {
    s->reader->AddLoss(reason, s->reader->acked_index(), records);
  } else if (records > 0) {
    Log()->warn("{} records of process key={} lost ({}) after it left the table", records,
                process_key, reason == XPU_LOSS_BUFFER ? "buffer" : "rejected");
  }
}

bool Collector::MayAct(const xpu::v1::Command& command, const ProcessState& s,
                       std::string* why) const {
  const bool ok = CallerMayAct(command, s.peer.uid, options_.engine_actions, why);
  if (!ok) ++commands_refused_;
  return ok;
}

void Collector::HandleCommand(const xpu::v1::Command& command, xpu::v1::CommandReply* reply) {
  reply->set_command_id(command.command_id());
  if (command.kind() == "history") {
    HandleHistory(command, reply);
    return;
  }
  if (command.kind() == "evidence") {
    HandleEvidence(command, reply);
    return;
  }
  if (command.kind() == "profile") {
    // Synchronous callers (tests, a client without the async path) wait here.
    auto promise = std::make_shared<std::promise<xpu::v1::CommandReply>>();
    std::future<xpu::v1::CommandReply> f = promise->get_future();
    profiles_->Start(command,
                     [promise](xpu::v1::CommandReply r) { promise->set_value(std::move(r)); });
    *reply = f.get();
    return;
  }
  reply->set_ok(false);
  reply->set_error(absl::StrCat("unknown command: ", command.kind()));
}

bool Collector::HandleCommandAsync(const xpu::v1::Command& command,
                                   std::function<void(xpu::v1::CommandReply)> done) {
  if (command.kind() != "profile") return false;
  profiles_->Start(command, std::move(done));
  return true;
}

void Collector::StopProfiles() { profiles_->Stop(); }

void Collector::ForEachProcess(const std::function<void(ProcessState&)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  table_.ForEach(fn);
}

// Hang evidence (daemon/evidence/): the targets are chosen under the lock,
// the slow part (debuggers, signals) runs without it.
void Collector::HandleEvidence(const xpu::v1::Command& command, xpu::v1::CommandReply* reply) {
  std::vector<EvidenceTarget> targets;
  std::vector<xpu::v1::ProcessEvidence> refused;
  {
    std::lock_guard<std::mutex> lock(mu_);
    table_.ForEach([&](ProcessState& s) {
      if (!command.job().empty() && s.identity.job != command.job()) return;
      if (command.ranks_size() > 0 && std::find(command.ranks().begin(), command.ranks().end(),
                                                s.identity.rank) == command.ranks().end()) {
        return;
      }
      std::string why;
      if (!MayAct(command, s, &why)) {
        // Nothing is read from or done to the process: no debugger, no signal.
        xpu::v1::ProcessEvidence ev;
        ev.set_process_key(s.key);
        FillIdentity(s, ev.mutable_identity());
        ev.set_proc_state("refused");
        ev.set_native_error("refused: " + why);
        ev.set_python_error("refused: " + why);
        refused.push_back(std::move(ev));
        return;
      }
      EvidenceTarget t;
      t.process_key = s.key;
      FillIdentity(s, &t.identity);
      t.pid = s.peer.pid > 0 ? s.peer.pid : s.identity.pid;
      t.start_ticks = s.peer.start_ticks;
      t.exited = s.exited;
      if (s.reader != nullptr) t.has_progress = ReadProgress(*s.reader, &t.progress);
      targets.push_back(std::move(t));
    });
  }
  const uint64_t deadline_ms = command.deadline_ms() > 0 ? command.deadline_ms() : 20000;
  xpu::v1::EvidenceReply ev = CollectEvidence(targets, EvidenceOptionsFromEnv(), deadline_ms,
                                              EvidenceModeFromString(command.evidence_mode()));
  for (auto& r : refused) *ev.add_processes() = std::move(r);
  if (!refused.empty()) {
    Log()->warn("evidence command {}: refused for {} processes ({})", command.command_id(),
                refused.size(), refused.front().native_error());
  }
  reply->set_ok(true);
  reply->set_payload(ev.SerializeAsString());
}

void Collector::HandleHistory(const xpu::v1::Command& command, xpu::v1::CommandReply* reply) {
  std::lock_guard<std::mutex> lock(mu_);
  // The reply budget (max_reply_records) is shared fairly between the
  // processes asked for: each gets an equal share, and what a process with
  // fewer records leaves over goes to the others (water-filling), so that no
  // rank is starved by the ones listed before it. Each process keeps its
  // newest records.
  std::vector<ProcessState*> asked;
  size_t refused = 0;
  std::string refused_why;
  table_.ForEach([&](ProcessState& s) {
    if (!command.job().empty() && s.identity.job != command.job()) return;
    if (command.ranks_size() > 0 && std::find(command.ranks().begin(), command.ranks().end(),
                                              s.identity.rank) == command.ranks().end()) {
      return;
    }
    if (!MayAct(command, s, &refused_why)) {
      ++refused;
      return;
    }
    asked.push_back(&s);
  });
  const uint64_t want = command.last_n() == 0 ? ~0ull : command.last_n();
  std::vector<uint64_t> avail(asked.size()), grant(asked.size());
  for (size_t i = 0; i < asked.size(); ++i) {
    // Every record the process could send (since_ns and last_n applied).
    avail[i] =
        asked[i]->history.Count(want == ~0ull ? 0 : want, command.since_ns(), command.until_ns());
  }
  std::vector<size_t> order(asked.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return avail[a] < avail[b]; });
  uint64_t budget = options_.max_reply_records;
  bool truncated = false;
  for (size_t k = 0; k < order.size(); ++k) {
    const size_t i = order[k];
    const uint64_t share = budget / (order.size() - k);
    grant[i] = std::min<uint64_t>(avail[i], share);
    truncated = truncated || grant[i] < avail[i];
    budget -= grant[i];
  }
  for (size_t i = 0; i < asked.size(); ++i) {
    const ProcessState& s = *asked[i];
    std::vector<ring::RingRecord> recs;  // Snapshot's last_n 0 would mean "all"
    if (grant[i] > 0) recs = s.history.Snapshot(grant[i], command.since_ns(), command.until_ns());
    xpu::v1::ProcessBatch* pb = reply->add_processes();
    pb->set_process_key(s.key);
    FillIdentity(s, pb->mutable_identity());
    for (const ring::SignatureInfo& sig : s.signatures) FillSignature(sig, pb->add_signatures());
    FillCounters(s, pb->mutable_counters());
    pb->set_exited(s.exited);
    std::string packed;
    packed.reserve(recs.size() * sizeof(xpu_record_v1));
    for (const ring::RingRecord& r : recs) AppendPacked(r.rec, &packed);
    if (!recs.empty()) pb->set_first_position(recs.front().position);
    pb->set_records(std::move(packed));
  }
  reply->set_ok(true);
  if (truncated) reply->set_payload("truncated");
  if (refused > 0) {
    reply->set_error(absl::StrCat("refused for ", refused, " processes: ", refused_why));
    Log()->warn("history command {}: {}", command.command_id(), reply->error());
  }
}

CollectorStats Collector::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  CollectorStats st;
  table_.ForEach([&](ProcessState& s) {
    ++st.processes;
    if (!s.exited) ++st.processes_live;
    if (s.reader == nullptr) return;
    const ring::RingReaderCounters& c = s.reader->counters();
    st.records_read += c.records_read;
    st.records_corrupt += c.records_corrupt;
    st.records_lapped += c.records_lapped;
    st.records_abandoned += c.records_abandoned;
    st.records_lost += c.LostTotal();
    st.resyncs += c.resyncs;
    st.records_replayed += c.records_replayed;
  });
  st.records_dropped_pending = records_dropped_pending_;
  st.commands_refused = commands_refused_;
  st.records_profile_unclaimed = records_profile_unclaimed_;
  return st;
}

bool Collector::WithProcess(uint64_t key, const std::function<void(ProcessState&)>& fn) {
  std::lock_guard<std::mutex> lock(mu_);
  ProcessState* s = table_.Find(key);
  if (s == nullptr) return false;
  fn(*s);
  return true;
}

}  // namespace xpu::daemon
