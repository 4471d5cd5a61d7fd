// query_service — the Query endpoint the CLI talks to: Status, Jobs, Ranks.
// Read-only; answers from the registry (live) and the store (history).
//
// Authorization (engine/auth/authorizer.h): Status and Jobs list only the
// jobs the caller may read; Ranks and Diagnoses need read on the job,
// TimelineDump needs act (it makes the daemons send the job's records).
// Thread-safety: handlers run concurrently; everything they touch is
// thread-safe.
#ifndef XPU_ENGINE_QUERY_SERVICE_H_
#define XPU_ENGINE_QUERY_SERVICE_H_

#include <cstdint>
#include <functional>
#include <string>

#include "engine/auth/authorizer.h"
#include "engine/history/store.h"
#include "engine/metrics.h"
#include "engine/state/registry.h"
#include "engine/timeline/dump_fanout.h"
#include "xpu/v1/query.grpc.pb.h"

namespace xpu::engine {

class QueryService final : public xpu::v1::Query::Service {
 public:
  QueryService(Registry& registry, Metrics& metrics, history::Store* store,
               const auth::Authorizer& authorizer, std::string engine_id, std::string version,
               uint64_t start_ns);

  grpc::Status Status(grpc::ServerContext* ctx, const xpu::v1::StatusRequest* req,
                      xpu::v1::StatusReply* reply) override;
  grpc::Status Jobs(grpc::ServerContext* ctx, const xpu::v1::JobsRequest* req,
                    xpu::v1::JobsReply* reply) override;
  grpc::Status Ranks(grpc::ServerContext* ctx, const xpu::v1::RanksRequest* req,
                     xpu::v1::RanksReply* reply) override;
  // Diagnoses of a job from the store (active and, on request, resolved).
  grpc::Status Diagnoses(grpc::ServerContext* ctx, const xpu::v1::DiagnosesRequest* req,
                         xpu::v1::DiagnosesReply* reply) override;
  // Fans a history command out to the job's daemons (engine/timeline/dump_fanout.h).
  grpc::Status TimelineDump(grpc::ServerContext* ctx, const xpu::v1::TimelineDumpRequest* req,
                            grpc::ServerWriter<xpu::v1::TimelineDumpMessage>* writer) override;
  // How TimelineDump reaches the daemons; set once by the engine before serving.
  void SetCommandSender(CommandSender send) { send_ = std::move(send); }
  // Engine replicas: this replica's id and the replicas of its database
  // (StatusReply.replica_id, .replicas); set once before serving.
  using ReplicaLister = std::function<std::vector<xpu::v1::ReplicaInfo>()>;
  void SetReplicas(std::string replica_id, ReplicaLister list) {
    replica_id_ = std::move(replica_id);
    list_replicas_ = std::move(list);
  }

 private:
  Registry& registry_;
  Metrics& metrics_;
  history::Store* store_;  // may be null
  CommandSender send_;     // empty: TimelineDump answers UNAVAILABLE
  const auth::Authorizer& authorizer_;
  const std::string engine_id_;
  const std::string version_;
  const uint64_t start_ns_;
  std::string replica_id_;
  ReplicaLister list_replicas_;  // empty: a lone engine
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_QUERY_SERVICE_H_
