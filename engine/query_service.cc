#include "engine/query_service.h"

#include <array>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"

namespace xpu::engine {
namespace {

void FillLost(const std::array<uint64_t, kLossReasons>& lost,
              google::protobuf::RepeatedPtrField<xpu::v1::LossCount>* out) {
  for (int r = 0; r < kLossReasons; ++r) {
    if (lost[r] == 0) continue;
    xpu::v1::LossCount* c = out->Add();
    c->set_reason(std::string(LossReasonName(r)));
    c->set_records(lost[r]);
  }
}

void FillStore(const history::StoreStatus& st, xpu::v1::StoreStatus* out) {
  out->set_degraded(st.degraded);
  out->set_error(st.error);
  out->set_degraded_since_ns(st.degraded_since_ns);
  out->set_write_failures(st.write_failures);
  out->set_rows_pending(st.rows_pending);
  out->set_rows_dropped(st.rows_dropped);
}

uint64_t SatAdd(uint64_t a, uint64_t b) { return a + b < a ? UINT64_MAX : a + b; }

void FillJob(const JobSummary& s, xpu::v1::JobInfo* j) {
  j->set_job(s.job);
  j->set_job_name(s.job_name);
  j->set_ranks(s.ranks);
  j->set_ranks_alive(s.ranks_alive);
  j->set_first_seen_ns(s.first_seen_ns);
  j->set_last_seen_ns(s.last_seen_ns);
  j->set_records(s.records);
  j->set_state(s.state);
  j->set_records_dropped(s.dropped);
  j->set_owner_uid(s.owner_uid);
  j->set_analysed_until_ns(s.analysed_until_ns);
  j->set_records_late(s.records_late);
}

}  // namespace

QueryService::QueryService(Registry& registry, Metrics& metrics, history::Store* store,
                           const auth::Authorizer& authorizer, std::string engine_id,
                           std::string version, uint64_t start_ns)
    : registry_(registry),
      metrics_(metrics),
      store_(store),
      authorizer_(authorizer),
      engine_id_(std::move(engine_id)),
      version_(std::move(version)),
      start_ns_(start_ns) {}

grpc::Status QueryService::Status(grpc::ServerContext* ctx, const xpu::v1::StatusRequest*,
                                  xpu::v1::StatusReply* reply) {
  auth::Caller caller;
  if (grpc::Status st = authorizer_.Require(*ctx, auth::kRead, &caller); !st.ok()) return st;
  reply->set_caller(caller.name);
  if (store_ != nullptr) FillStore(store_->Status(), reply->mutable_store());
  const uint64_t now = registry_.Now();
  reply->set_engine_id(engine_id_);
  reply->set_version(version_);
  reply->set_uptime_s(now > start_ns_ ? (now - start_ns_) / 1000000000ull : 0);
  uint64_t records = 0;
  for (const DaemonState& d : registry_.Daemons()) {
    xpu::v1::DaemonInfo* di = reply->add_daemons();
    di->set_daemon_id(d.daemon_id);
    di->set_host(d.host);
    di->set_connected(d.connected);
    di->set_last_seen_ns(d.last_seen_ns);
    di->set_batches(d.batches);
    di->set_records(d.records);
    di->set_records_dropped(d.records_dropped);
    records += d.records;
  }
  std::array<uint64_t, kLossReasons> lost{};
  uint64_t dropped = 0;
  for (const JobSummary& s : registry_.JobSummaries(/*include_finished=*/false)) {
    if (!caller.MayOnJob(auth::kRead, s.owner_uid)) continue;
    FillJob(s, reply->add_jobs());
    dropped = SatAdd(dropped, s.dropped);
    // From the summary: never waits for a job whose window is being analysed.
    for (int r = 0; r < kLossReasons; ++r) lost[r] = SatAdd(lost[r], s.lost[r]);
  }
  reply->set_records_dropped_total(dropped);
  FillLost(lost, reply->mutable_lost());
  reply->set_records_total(records);
  reply->set_rejected_total(static_cast<uint64_t>(metrics_.RejectedTotal()));
  reply->set_replica_id(replica_id_);
  if (list_replicas_) {
    for (xpu::v1::ReplicaInfo& r : list_replicas_()) *reply->add_replicas() = std::move(r);
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::Jobs(grpc::ServerContext* ctx, const xpu::v1::JobsRequest* req,
                                xpu::v1::JobsReply* reply) {
  auth::Caller caller;
  if (grpc::Status st = authorizer_.Require(*ctx, auth::kRead, &caller); !st.ok()) return st;
  for (const JobSummary& s : registry_.JobSummaries(req->include_finished())) {
    if (caller.MayOnJob(auth::kRead, s.owner_uid)) FillJob(s, reply->add_jobs());
  }
  return grpc::Status::OK;
}

grpc::Status QueryService::Ranks(grpc::ServerContext* ctx, const xpu::v1::RanksRequest* req,
                                 xpu::v1::RanksReply* reply) {
  auth::Caller caller;
  if (grpc::Status st = authorizer_.RequireJob(*ctx, auth::kRead, req->job(), &caller); !st.ok())
    return st;
  reply->set_job(req->job());
  std::shared_ptr<JobState> job = registry_.FindJob(req->job());
  if (job) {
    std::lock_guard<std::mutex> l(job->mu());
    for (const auto& [key, p] : job->processes()) {
      xpu::v1::RankInfo* r = reply->add_ranks();
      r->set_rank(p->identity.rank());
      r->set_host(p->identity.host());
      r->set_pid(p->identity.pid());
      r->set_local_rank(p->identity.local_rank());
      r->set_liveness(std::string(LivenessName(p->liveness)));
      r->set_last_record_ns(p->last_record_ns);
      r->set_last_seen_ns(p->last_seen_ns);
      r->set_records(p->records);
      r->set_dropped(p->dropped);
      r->set_signatures(p->sigs.size());
      *r->mutable_counters() = p->counters;
      FillLost(p->lost, r->mutable_lost());
    }
    return grpc::Status::OK;
  }
  if (store_ != nullptr) {
    absl::StatusOr<std::vector<history::RankRow>> rows = store_->LoadRanks(req->job());
    if (!rows.ok())
      return grpc::Status(grpc::StatusCode::INTERNAL, std::string(rows.status().message()));
    for (const history::RankRow& row : *rows) {
      xpu::v1::RankInfo* r = reply->add_ranks();
      r->set_rank(row.rank);
      r->set_host(row.host);
      r->set_pid(row.pid);
      r->set_local_rank(row.local_rank);
      r->set_liveness(row.liveness);
      r->set_last_record_ns(row.last_record_ns);
      r->set_last_seen_ns(row.last_seen_ns);
      r->set_records(row.records);
      r->set_dropped(row.dropped);
    }
    if (!rows->empty()) return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no job '", req->job(), "'"));
}

grpc::Status QueryService::TimelineDump(grpc::ServerContext* ctx,
                                        const xpu::v1::TimelineDumpRequest* req,
                                        grpc::ServerWriter<xpu::v1::TimelineDumpMessage>* writer) {
  if (req->job().empty())
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job is required");
  auth::Caller caller;
  if (grpc::Status st = authorizer_.RequireJob(*ctx, auth::kAct, req->job(), &caller); !st.ok())
    return st;
  if (!send_)
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no command channel to the daemons");
  absl::Status st = timeline::RunTimelineDump(
      registry_, send_, *req,
      [&](const xpu::v1::TimelineDumpMessage& m) {
        return !ctx->IsCancelled() && writer->Write(m);
      },
      auth::ToCommandCaller(caller));
  if (st.ok()) return grpc::Status::OK;
  if (absl::IsNotFound(st))
    return grpc::Status(grpc::StatusCode::NOT_FOUND, std::string(st.message()));
  return grpc::Status(grpc::StatusCode::CANCELLED, std::string(st.message()));
}

grpc::Status QueryService::Diagnoses(grpc::ServerContext* ctx, const xpu::v1::DiagnosesRequest* req,
                                     xpu::v1::DiagnosesReply* reply) {
  auth::Caller caller;
  if (grpc::Status st = authorizer_.RequireJob(*ctx, auth::kRead, req->job(), &caller); !st.ok())
    return st;
  reply->set_job(req->job());
  if (store_ == nullptr) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "no history store");
  // What the window thread enqueued must be visible to this query, but a
  // writer far behind (100k ranks: a rank row per rank and window, a
  // checkpoint per batch) must not hold the answer: beyond 10,000 rows
  // queued, at most 0.5 s, then what is committed. (Waiting for all of it,
  // `xpu diagnose` of a 100k-rank job ran past its 5 s deadline.)
  store_->FlushFor(std::chrono::milliseconds(500), 10000);
  absl::StatusOr<std::vector<Diagnosis>> ds = store_->LoadDiagnoses(req->job());
  if (!ds.ok()) return grpc::Status(grpc::StatusCode::INTERNAL, std::string(ds.status().message()));
  absl::StatusOr<std::vector<history::DiagnosisResolution>> res =
      store_->LoadDiagnosisResolutions(req->job());
  if (!res.ok())
    return grpc::Status(grpc::StatusCode::INTERNAL, std::string(res.status().message()));
  if (ds->empty() && !registry_.FindJob(req->job())) {
    absl::StatusOr<std::vector<history::RankRow>> ranks = store_->LoadRanks(req->job());
    if (!ranks.ok() || ranks->empty()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("no job '", req->job(), "'"));
    }
  }
  std::map<std::pair<std::string, std::string>, uint64_t> resolved;
  for (const history::DiagnosisResolution& r : *res) resolved[{r.kind, r.subject}] = r.resolved_ns;
  for (const Diagnosis& d : *ds) {
    auto it = resolved.find({d.kind, d.subject});
    const bool active = it == resolved.end();
    if (!active && !req->include_resolved()) continue;
    xpu::v1::DiagnosisInfo* o = reply->add_diagnoses();
    o->set_job(d.job);
    o->set_kind(d.kind);
    o->set_subject(d.subject);
    o->set_team(std::string(TeamName(d.team)));
    o->set_severity(std::string(SeverityName(d.severity)));
    for (int32_t r : d.ranks) o->add_ranks(r);
    for (const std::string& h : d.hosts) o->add_hosts(h);
    o->set_evidence(d.evidence);
    o->set_first_seen_ns(d.first_seen_ns);
    o->set_last_seen_ns(d.last_seen_ns);
    o->set_active(active);
    o->set_resolved_ns(active ? 0 : it->second);
  }
  return grpc::Status::OK;
}

}  // namespace xpu::engine
