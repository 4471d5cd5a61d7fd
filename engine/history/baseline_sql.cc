#include "engine/history/baseline_sql.h"

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"

namespace xpu::engine::history {
namespace {

// Child tables of baseline_runs, cleared and pruned with it.
const char* const kRunChildren[] = {"baseline_gemm", "baseline_collective",
                                    "baseline_issue_latency"};

absl::Status ReadChildren(SqlConnection& db, RunBaseline* r) {
  const std::vector<SqlValue> key = Params(r->job_name, r->gpu_model, r->job);
  {
    XPU_ASSIGN_OR_RETURN(SqlResult q, db.Query("SELECT signature, dtype, tflops, count FROM "
                                               "baseline_gemm WHERE job_name=$1 AND "
                                               "gpu_model=$2 AND job=$3;",
                                               key));
    for (size_t i = 0; i < q.rows(); ++i) {
      r->gemm[q.Text(i, 0)] =
          GemmFigure{q.Text(i, 1), q.Real(i, 2), static_cast<uint64_t>(q.Int(i, 3))};
    }
  }
  {
    XPU_ASSIGN_OR_RETURN(
        SqlResult q,
        db.Query("SELECT op, bytes, nranks, nodes, busbw_bytes_per_second, count FROM "
                 "baseline_collective WHERE job_name=$1 AND gpu_model=$2 AND job=$3;",
                 key));
    for (size_t i = 0; i < q.rows(); ++i) {
      CollectiveShape s{q.Text(i, 0), static_cast<uint64_t>(q.Int(i, 1)),
                        static_cast<int32_t>(q.Int(i, 2)), static_cast<int32_t>(q.Int(i, 3))};
      r->busbw[s] = BusBwFigure{q.Real(i, 4), static_cast<uint64_t>(q.Int(i, 5))};
    }
  }
  XPU_ASSIGN_OR_RETURN(SqlResult q, db.Query("SELECT family, bucket, count FROM "
                                             "baseline_issue_latency WHERE job_name=$1 AND "
                                             "gpu_model=$2 AND job=$3;",
                                             key));
  for (size_t i = 0; i < q.rows(); ++i) {
    const int64_t count = q.Int(i, 2);
    if (count > 0) {
      r->issue_latency[q.Text(i, 0)].Set(static_cast<int>(q.Int(i, 1)),
                                         static_cast<uint64_t>(count));
    }
  }
  return absl::OkStatus();
}

absl::Status WriteRunChildren(SqlConnection& db, const RunBaseline& run) {
  for (const auto& [key, g] : run.gemm) {
    XPU_RETURN_IF_ERROR(db.Run("INSERT INTO baseline_gemm VALUES ($1,$2,$3,$4,$5,$6,$7);",
                               Params(run.job_name, run.gpu_model, run.job, key, g.dtype,
                                      g.tflops, g.count)));
  }
  for (const auto& [shape, b] : run.busbw) {
    XPU_RETURN_IF_ERROR(
        db.Run("INSERT INTO baseline_collective VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9);",
               Params(run.job_name, run.gpu_model, run.job, shape.op, shape.bytes, shape.nranks,
                      shape.nodes, b.busbw, b.count)));
  }
  for (const auto& [family, h] : run.issue_latency) {
    for (int b = 0; b < LatencyHistogram::kBuckets; ++b) {
      if (h.count(b) == 0) continue;  // zero means "no samples": not stored
      XPU_RETURN_IF_ERROR(
          db.Run("INSERT INTO baseline_issue_latency VALUES ($1,$2,$3,$4,$5,$6);",
                 Params(run.job_name, run.gpu_model, run.job, family, b, h.count(b))));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteRunBaseline(SqlConnection& db, const RunBaseline& run, int keep_runs) {
  XPU_RETURN_IF_ERROR(db.Run(
      "INSERT INTO baseline_runs VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10) "
      "ON CONFLICT (job_name, gpu_model, job) DO UPDATE SET updated_ns=excluded.updated_ns, "
      "windows=excluded.windows, steps=excluded.steps, step_median_s=excluded.step_median_s, "
      "step_best_s=excluded.step_best_s, void_inter=excluded.void_inter, "
      "void_minority=excluded.void_minority;",
      Params(run.job_name, run.gpu_model, run.job, run.updated_ns, run.windows, run.steps,
             run.step_median_s, run.step_best_s, run.void_inter, run.void_minority)));
  for (const char* table : kRunChildren) {
    XPU_RETURN_IF_ERROR(
        db.Run(absl::StrCat("DELETE FROM ", table, " WHERE job_name=$1 AND gpu_model=$2 AND job=$3;"),
               Params(run.job_name, run.gpu_model, run.job)));
  }
  XPU_RETURN_IF_ERROR(WriteRunChildren(db, run));
  if (keep_runs > 0) {
    XPU_RETURN_IF_ERROR(db.Run(
        "DELETE FROM baseline_runs WHERE job_name=$1 AND gpu_model=$2 AND job NOT IN (SELECT "
        "job FROM baseline_runs WHERE job_name=$1 AND gpu_model=$2 ORDER BY updated_ns DESC "
        "LIMIT $3);",
        Params(run.job_name, run.gpu_model, keep_runs)));
    for (const char* table : kRunChildren) {
      XPU_RETURN_IF_ERROR(db.Run(
          absl::StrCat("DELETE FROM ", table,
                       " WHERE job_name=$1 AND gpu_model=$2 AND job NOT IN (SELECT job FROM "
                       "baseline_runs WHERE job_name=$1 AND gpu_model=$2);"),
          Params(run.job_name, run.gpu_model)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RunBaseline>> ReadRunBaselines(SqlConnection& db,
                                                          const std::string& job_name,
                                                          const std::string& gpu_model,
                                                          bool any_model,
                                                          const std::string& exclude_job,
                                                          int limit) {
  std::string sql =
      "SELECT gpu_model, job, updated_ns, windows, steps, step_median_s, step_best_s, "
      "void_inter, void_minority FROM baseline_runs WHERE job_name=$1 AND ($2 = 1 OR "
      "gpu_model=$3) AND job<>$4 ORDER BY updated_ns DESC";
  std::vector<SqlValue> params = Params(job_name, any_model, gpu_model, exclude_job);
  if (limit > 0) {
    sql += " LIMIT $5";
    params.push_back(ToSql(limit));
  }
  sql += ";";
  XPU_ASSIGN_OR_RETURN(SqlResult q, db.Query(sql, params));
  std::vector<RunBaseline> out;
  for (size_t i = 0; i < q.rows(); ++i) {
    RunBaseline r;
    r.job_name = job_name;
    r.gpu_model = q.Text(i, 0);
    r.job = q.Text(i, 1);
    r.updated_ns = static_cast<uint64_t>(q.Int(i, 2));
    r.windows = static_cast<uint32_t>(q.Int(i, 3));
    r.steps = static_cast<uint64_t>(q.Int(i, 4));
    r.step_median_s = q.Real(i, 5);
    r.step_best_s = q.Real(i, 6);
    r.void_inter = q.Real(i, 7);
    r.void_minority = q.Real(i, 8);
    out.push_back(std::move(r));
  }
  for (RunBaseline& r : out) {
    XPU_RETURN_IF_ERROR(ReadChildren(db, &r));
  }
  return out;
}

absl::Status WriteCalibration(SqlConnection& db, const CalibrationRows& rows) {
  for (const GemmCalibrationRow& g : rows.gemm) {
    XPU_RETURN_IF_ERROR(db.Run(
        "INSERT INTO calibration_gemm VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10) "
        "ON CONFLICT (gpu_model, host, dtype) DO UPDATE SET tflops=excluded.tflops, "
        "tflops_min=excluded.tflops_min, m=excluded.m, n=excluded.n, k=excluded.k, "
        "devices=excluded.devices, measured_ns=excluded.measured_ns;",
        Params(g.gpu_model, g.host, g.dtype, g.tflops, g.tflops_min, g.m, g.n, g.k, g.devices,
               g.measured_ns)));
  }
  for (const CollectiveCalibrationRow& c : rows.collectives) {
    XPU_RETURN_IF_ERROR(db.Run(
        "INSERT INTO calibration_collective VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10) "
        "ON CONFLICT (gpu_model, host, op, bytes, nranks, nodes) DO UPDATE SET "
        "time_us=excluded.time_us, algbw_bytes_per_second=excluded.algbw_bytes_per_second, "
        "busbw_bytes_per_second=excluded.busbw_bytes_per_second, "
        "measured_ns=excluded.measured_ns;",
        Params(c.gpu_model, c.host, c.shape.op, c.shape.bytes, c.shape.nranks, c.shape.nodes,
               c.time_us, c.algbw, c.busbw, c.measured_ns)));
  }
  return absl::OkStatus();
}

absl::StatusOr<CalibrationRows> ReadCalibration(SqlConnection& db, const std::string& gpu_model) {
  CalibrationRows out;
  const bool all = gpu_model.empty();
  {
    XPU_ASSIGN_OR_RETURN(
        SqlResult q,
        db.Query("SELECT gpu_model, host, dtype, tflops, tflops_min, m, n, k, devices, "
                 "measured_ns FROM calibration_gemm WHERE $1 = 1 OR gpu_model=$2 ORDER BY "
                 "gpu_model, host, dtype;",
                 Params(all, gpu_model)));
    for (size_t i = 0; i < q.rows(); ++i) {
      GemmCalibrationRow g;
      g.gpu_model = q.Text(i, 0);
      g.host = q.Text(i, 1);
      g.dtype = q.Text(i, 2);
      g.tflops = q.Real(i, 3);
      g.tflops_min = q.Real(i, 4);
      g.m = static_cast<uint32_t>(q.Int(i, 5));
      g.n = static_cast<uint32_t>(q.Int(i, 6));
      g.k = static_cast<uint32_t>(q.Int(i, 7));
      g.devices = static_cast<uint32_t>(q.Int(i, 8));
      g.measured_ns = static_cast<uint64_t>(q.Int(i, 9));
      out.gemm.push_back(std::move(g));
    }
  }
  XPU_ASSIGN_OR_RETURN(
      SqlResult q,
      db.Query("SELECT gpu_model, host, op, bytes, nranks, nodes, time_us, "
               "algbw_bytes_per_second, busbw_bytes_per_second, measured_ns FROM "
               "calibration_collective WHERE $1 = 1 OR gpu_model=$2 ORDER BY gpu_model, host, "
               "op, nranks, nodes, bytes;",
               Params(all, gpu_model)));
  for (size_t i = 0; i < q.rows(); ++i) {
    CollectiveCalibrationRow c;
    c.gpu_model = q.Text(i, 0);
    c.host = q.Text(i, 1);
    c.shape = CollectiveShape{q.Text(i, 2), static_cast<uint64_t>(q.Int(i, 3)),
                              static_cast<int32_t>(q.Int(i, 4)), static_cast<int32_t>(q.Int(i, 5))};
    c.time_us = q.Real(i, 6);
    c.algbw = q.Real(i, 7);
    c.busbw = q.Real(i, 8);
    c.measured_ns = static_cast<uint64_t>(q.Int(i, 9));
    out.collectives.push_back(std::move(c));
  }
  return out;
}

}  // namespace xpu::engine::history
