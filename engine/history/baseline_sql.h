// baseline_sql — reads and writes the history tables of schema version 3
// (created by the store's migration step 3, store.cc):
//
//   baseline_runs          one row per run: (job_name, gpu_model, job) ->
//                          windows, steps, step median / best, void %
//   baseline_gemm          per run and StableGemmKey: dtype, TFLOPS
//   baseline_collective    per run and (op, bytes, nranks, nodes): busbw
//   baseline_issue_latency per run, family and log bucket: count
//   calibration_gemm       per (gpu_model, host, dtype): TFLOPS
//   calibration_collective per (gpu_model, host, op, bytes, nranks, nodes): busbw
//
// One SQL text for both backends (sql.h).
// Thread-safety: none; callers pass a connection they own (the store's
// writer or its read connection under its lock). Writers run inside the
// caller's transaction.
#ifndef XPU_ENGINE_HISTORY_BASELINE_SQL_H_
#define XPU_ENGINE_HISTORY_BASELINE_SQL_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/history/baselines.h"
#include "engine/history/sql.h"

namespace xpu::engine::history {

// Replaces the rows of run.job under (run.job_name, run.gpu_model), then
// keeps only the newest `keep_runs` runs of that key (by updated_ns).
absl::Status WriteRunBaseline(SqlConnection& db, const RunBaseline& run, int keep_runs);

// Runs of `job_name` on `gpu_model` other than `exclude_job`, newest first,
// at most `limit` (0: all). With `any_model`, gpu_model is ignored.
absl::StatusOr<std::vector<RunBaseline>> ReadRunBaselines(SqlConnection& db,
                                                          const std::string& job_name,
                                                          const std::string& gpu_model,
                                                          bool any_model,
                                                          const std::string& exclude_job,
                                                          int limit);

// Upserts every row (a re-run of `xpu calibrate` on a host replaces its rows).
absl::Status WriteCalibration(SqlConnection& db, const CalibrationRows& rows);
// Rows of `gpu_model` (empty: every model).
absl::StatusOr<CalibrationRows> ReadCalibration(SqlConnection& db, const std::string& gpu_model);

}  // namespace xpu::engine::history

#endif  // XPU_ENGINE_HISTORY_BASELINE_SQL_H_
