#include "engine/history/baseline_sql.h"

#include "common/base/status_macros.h"
#include "engine/history/sqlite_util.h"

namespace xpu::engine::history {
namespace {

// Child tables of baseline_runs, cleared and pruned with it.
const char* const kRunChildren[] = {"baseline_gemm", "baseline_collective",
                                    "baseline_issue_latency"};

absl::Status ReadChildren(sqlite3* db, RunBaseline* r) {
  {
    Stmt q(db,
           "SELECT signature, dtype, tflops, count FROM baseline_gemm WHERE job_name=?1 AND "
           "gpu_model=?2 "
           "AND job=?3;");
    q.Bind(1, r->job_name).Bind(2, r->gpu_model).Bind(3, r->job);
    while (true) {
      XPU_ASSIGN_OR_RETURN(const bool more, q.Step());
      if (!more) break;
      r->gemm[q.Text(0)] = GemmFigure{q.Text(1), q.Real(2), static_cast<uint64_t>(q.Int(3))};
    }
  }
  {
    Stmt q(
        db,
        "SELECT op, bytes, nranks, nodes, busbw_bytes_per_second, count FROM baseline_collective "
        "WHERE job_name=?1 AND gpu_model=?2 AND job=?3;");
    q.Bind(1, r->job_name).Bind(2, r->gpu_model).Bind(3, r->job);
    while (true) {
      XPU_ASSIGN_OR_RETURN(const bool more, q.Step());
      if (!more) break;
      CollectiveShape s{q.Text(0), static_cast<uint64_t>(q.Int(1)), static_cast<int32_t>(q.Int(2)),
                        static_cast<int32_t>(q.Int(3))};
      r->busbw[s] = BusBwFigure{q.Real(4), static_cast<uint64_t>(q.Int(5))};
    }
  }
  {
    Stmt q(db,
           "SELECT family, bucket, count FROM baseline_issue_latency WHERE job_name=?1 AND "
           "gpu_model=?2 "
           "AND job=?3;");
    q.Bind(1, r->job_name).Bind(2, r->gpu_model).Bind(3, r->job);
    while (true) {
      XPU_ASSIGN_OR_RETURN(const bool more, q.Step());
      if (!more) break;
      const int64_t count = q.Int(2);
      if (count > 0)
        r->issue_latency[q.Text(0)].Set(static_cast<int>(q.Int(1)), static_cast<uint64_t>(count));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteRunBaseline(sqlite3* db, const RunBaseline& run, int keep_runs) {
  {
    Stmt s(db, "INSERT OR REPLACE INTO baseline_runs VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10);");
    XPU_RETURN_IF_ERROR(s.Bind(1, run.job_name)
                            .Bind(2, run.gpu_model)
                            .Bind(3, run.job)
                            .Bind(4, run.updated_ns)
                            .Bind(5, run.windows)
                            .Bind(6, run.steps)
                            .Bind(7, run.step_median_s)
                            .Bind(8, run.step_best_s)
                            .Bind(9, run.void_inter)
                            .Bind(10, run.void_minority)
                            .Run());
  }
  for (const char* table : kRunChildren) {
    std::string sql =
        absl::StrCat("DELETE FROM ", table, " WHERE job_name=?1 AND gpu_model=?2 AND job=?3;");
    Stmt del(db, sql.c_str());
    if (absl::Status st = del.Bind(1, run.job_name).Bind(2, run.gpu_model).Bind(3, run.job).Run();
        !st.ok()) {
      return st;
    }
  }
  for (const auto& [key, g] : run.gemm) {
    Stmt s(db, "INSERT INTO baseline_gemm VALUES (?1,?2,?3,?4,?5,?6,?7);");
    XPU_RETURN_IF_ERROR(s.Bind(1, run.job_name)
                            .Bind(2, run.gpu_model)
                            .Bind(3, run.job)
                            .Bind(4, key)
                            .Bind(5, g.dtype)
                            .Bind(6, g.tflops)
                            .Bind(7, g.count)
                            .Run());
  }
  for (const auto& [shape, b] : run.busbw) {
    Stmt s(db, "INSERT INTO baseline_collective VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9);");
    XPU_RETURN_IF_ERROR(s.Bind(1, run.job_name)
                            .Bind(2, run.gpu_model)
                            .Bind(3, run.job)
                            .Bind(4, shape.op)
                            .Bind(5, shape.bytes)
                            .Bind(6, shape.nranks)
                            .Bind(7, shape.nodes)
                            .Bind(8, b.busbw)
                            .Bind(9, b.count)
                            .Run());
  }
  for (const auto& [family, h] : run.issue_latency) {
    for (int b = 0; b < LatencyHistogram::kBuckets; ++b) {
      if (h.count(b) == 0) continue;  // zero means "no samples": not stored
      Stmt s(db, "INSERT INTO baseline_issue_latency VALUES (?1,?2,?3,?4,?5,?6);");
      XPU_RETURN_IF_ERROR(s.Bind(1, run.job_name)
                              .Bind(2, run.gpu_model)
                              .Bind(3, run.job)
                              .Bind(4, family)
                              .Bind(5, b)
                              .Bind(6, h.count(b))
                              .Run());
    }
  }
  if (keep_runs > 0) {
    Stmt prune(
        db,
        "DELETE FROM baseline_runs WHERE job_name=?1 AND gpu_model=?2 AND job NOT IN (SELECT job "
        "FROM "
        "baseline_runs WHERE job_name=?1 AND gpu_model=?2 ORDER BY updated_ns DESC LIMIT ?3);");
    if (absl::Status st =
            prune.Bind(1, run.job_name).Bind(2, run.gpu_model).Bind(3, keep_runs).Run();
        !st.ok()) {
      return st;
    }
    for (const char* table : kRunChildren) {
      std::string sql =
          absl::StrCat("DELETE FROM ", table,
                       " WHERE job_name=?1 AND gpu_model=?2 AND job NOT IN (SELECT job FROM "
                       "baseline_runs WHERE job_name=?1 AND gpu_model=?2);");
      Stmt del(db, sql.c_str());
      if (absl::Status st = del.Bind(1, run.job_name).Bind(2, run.gpu_model).Run(); !st.ok())
        return st;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RunBaseline>> ReadRunBaselines(sqlite3* db, const std::string& job_name,
                                                          const std::string& gpu_model,
                                                          bool any_model,
                                                          const std::string& exclude_job,
                                                          int limit) {
  Stmt q(
      db,
      "SELECT gpu_model, job, updated_ns, windows, steps, step_median_s, step_best_s, void_inter, "
      "void_minority FROM baseline_runs WHERE job_name=?1 AND (?2 OR gpu_model=?3) AND job<>?4 "
      "ORDER BY updated_ns DESC LIMIT ?5;");
  q.Bind(1, job_name)
      .Bind(2, static_cast<int64_t>(any_model))
      .Bind(3, gpu_model)
      .Bind(4, exclude_job)
      .Bind(5, static_cast<int64_t>(limit > 0 ? limit : -1));
  std::vector<RunBaseline> out;
  while (true) {
    XPU_ASSIGN_OR_RETURN(const bool more, q.Step());
    if (!more) break;
    RunBaseline r;
    r.job_name = job_name;
    r.gpu_model = q.Text(0);
    r.job = q.Text(1);
    r.updated_ns = static_cast<uint64_t>(q.Int(2));
    r.windows = static_cast<uint32_t>(q.Int(3));
    r.steps = static_cast<uint64_t>(q.Int(4));
    r.step_median_s = q.Real(5);
    r.step_best_s = q.Real(6);
    r.void_inter = q.Real(7);
    r.void_minority = q.Real(8);
    out.push_back(std::move(r));
  }
  for (RunBaseline& r : out) {
    XPU_RETURN_IF_ERROR(ReadChildren(db, &r));
  }
  return out;
}

absl::Status WriteCalibration(sqlite3* db, const CalibrationRows& rows) {
  for (const GemmCalibrationRow& g : rows.gemm) {
    Stmt s(db, "INSERT OR REPLACE INTO calibration_gemm VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10);");
    XPU_RETURN_IF_ERROR(s.Bind(1, g.gpu_model)
                            .Bind(2, g.host)
                            .Bind(3, g.dtype)
                            .Bind(4, g.tflops)
                            .Bind(5, g.tflops_min)
                            .Bind(6, g.m)
                            .Bind(7, g.n)
                            .Bind(8, g.k)
                            .Bind(9, g.devices)
                            .Bind(10, g.measured_ns)
                            .Run());
  }
  for (const CollectiveCalibrationRow& c : rows.collectives) {
    Stmt s(
        db,
        "INSERT OR REPLACE INTO calibration_collective VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10);");
    XPU_RETURN_IF_ERROR(s.Bind(1, c.gpu_model)
                            .Bind(2, c.host)
                            .Bind(3, c.shape.op)
                            .Bind(4, c.shape.bytes)
                            .Bind(5, c.shape.nranks)
                            .Bind(6, c.shape.nodes)
                            .Bind(7, c.time_us)
                            .Bind(8, c.algbw)
                            .Bind(9, c.busbw)
                            .Bind(10, c.measured_ns)
                            .Run());
  }
  return absl::OkStatus();
}

absl::StatusOr<CalibrationRows> ReadCalibration(sqlite3* db, const std::string& gpu_model) {
  CalibrationRows out;
  const int64_t all = gpu_model.empty();
  {
    Stmt q(db,
           "SELECT gpu_model, host, dtype, tflops, tflops_min, m, n, k, devices, measured_ns FROM "
           "calibration_gemm WHERE ?1 OR gpu_model=?2 ORDER BY gpu_model, host, dtype;");
    q.Bind(1, all).Bind(2, gpu_model);
    while (true) {
      XPU_ASSIGN_OR_RETURN(const bool more, q.Step());
      if (!more) break;
      GemmCalibrationRow g;
      g.gpu_model = q.Text(0);
      g.host = q.Text(1);
      g.dtype = q.Text(2);
      g.tflops = q.Real(3);
      g.tflops_min = q.Real(4);
      g.m = static_cast<uint32_t>(q.Int(5));
      g.n = static_cast<uint32_t>(q.Int(6));
      g.k = static_cast<uint32_t>(q.Int(7));
      g.devices = static_cast<uint32_t>(q.Int(8));
      g.measured_ns = static_cast<uint64_t>(q.Int(9));
      out.gemm.push_back(std::move(g));
    }
  }
  Stmt q(db,
         "SELECT gpu_model, host, op, bytes, nranks, nodes, time_us, algbw_bytes_per_second, "
         "busbw_bytes_per_second, measured_ns FROM calibration_collective WHERE ?1 OR gpu_model=?2 "
         "ORDER BY gpu_model, host, op, nranks, nodes, bytes;");
  q.Bind(1, all).Bind(2, gpu_model);
  while (true) {
    XPU_ASSIGN_OR_RETURN(const bool more, q.Step());
    if (!more) break;
    CollectiveCalibrationRow c;
    c.gpu_model = q.Text(0);
    c.host = q.Text(1);
    c.shape = CollectiveShape{q.Text(2), static_cast<uint64_t>(q.Int(3)),
                              static_cast<int32_t>(q.Int(4)), static_cast<int32_t>(q.Int(5))};
    c.time_us = q.Real(6);
    c.algbw = q.Real(7);
    c.busbw = q.Real(8);
    c.measured_ns = static_cast<uint64_t>(q.Int(9));
    out.collectives.push_back(std::move(c));
  }
  return out;
}

}  // namespace xpu::engine::history
