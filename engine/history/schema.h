// schema — the store's tables and their migrations, for both backends.
//
// Each step runs once, in order, inside a transaction, and bumps
// schema_version; step i brings the schema to version i+1. Never edit a
// shipped step; append one. SQLite and PostgreSQL share the version numbers:
// steps 1-4 were written for SQLite (INTEGER is 64-bit there, REAL is a
// double) and have a PostgreSQL twin with BIGINT and DOUBLE PRECISION;
// later steps are one text for both.
//
// On PostgreSQL several engines may start at once on a fresh database: the
// migration runs under a session advisory lock (kMigrationLockKey), so one
// engine migrates while the others wait and then find the work done.
#ifndef XPU_ENGINE_HISTORY_SCHEMA_H_
#define XPU_ENGINE_HISTORY_SCHEMA_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/history/sql.h"

namespace xpu::engine::history {

inline constexpr int kSchemaVersion = 5;
inline constexpr int64_t kMigrationLockKey = 0x7870755f736368;  // "xpu_sch"

// The version the database is at (0: empty).
absl::StatusOr<int> ReadSchemaVersion(SqlConnection& db);
// Brings the database to kSchemaVersion; refuses one newer than that.
absl::Status Migrate(SqlConnection& db);

}  // namespace xpu::engine::history

#endif  // XPU_ENGINE_HISTORY_SCHEMA_H_
