// sql — the one interface the store speaks to its database through, with two
// backends: the embedded SQLite file (the default, one machine) and
// PostgreSQL over libpq (`--db postgresql://...`, shared by engine replicas).
//
// Everything above this layer (store.cc, baseline_sql.cc, schema.cc,
// leases.cc) writes one SQL text for both: `$1..$N` positional parameters
// (rewritten to `?N` for SQLite), `INSERT ... ON CONFLICT (...) DO UPDATE`
// upserts, types BIGINT / DOUBLE PRECISION / TEXT. Where the dialects
// differ (the database clock, row locks, the first migration steps) the
// connection says which one it is.
//
// Text parameters are made safe for both backends before they are bound:
// NUL bytes and invalid UTF-8 (which PostgreSQL refuses, and which a daemon
// could send in a job name) become U+FFFD, so one hostile string costs its
// sender a mangled name, never a failed transaction for everyone.
//
// Thread-safety: a connection is used by one thread at a time (its owner
// serializes access); results are plain values.
#ifndef XPU_ENGINE_HISTORY_SQL_H_
#define XPU_ENGINE_HISTORY_SQL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace xpu::engine::history {

// NULL, integer, real or text.
using SqlValue = std::variant<std::monostate, int64_t, double, std::string>;

inline SqlValue ToSql(int64_t v) { return v; }
inline SqlValue ToSql(uint64_t v) { return static_cast<int64_t>(v); }  // ns, counts: < 2^63
inline SqlValue ToSql(int32_t v) { return static_cast<int64_t>(v); }
inline SqlValue ToSql(uint32_t v) { return static_cast<int64_t>(v); }
inline SqlValue ToSql(bool v) { return static_cast<int64_t>(v); }
inline SqlValue ToSql(double v) { return v; }
inline SqlValue ToSql(std::string v) { return v; }
inline SqlValue ToSql(std::string_view v) { return std::string(v); }
inline SqlValue ToSql(const char* v) { return std::string(v); }
inline SqlValue ToSql(SqlValue v) { return v; }

// Params(a, b, c) -> {$1, $2, $3}.
template <typename... T>
std::vector<SqlValue> Params(T&&... v) {
  std::vector<SqlValue> out;
  out.reserve(sizeof...(v));
  (out.push_back(ToSql(std::forward<T>(v))), ...);
  return out;
}

// `s` as valid UTF-8 without NUL bytes (each bad byte -> U+FFFD).
std::string SafeText(std::string_view s);

// The rows of one statement. Cells keep the backend's representation
// (PostgreSQL sends text); the accessors convert.
class SqlResult {
 public:
  size_t rows() const { return rows_.size(); }
  bool empty() const { return rows_.empty(); }
  bool IsNull(size_t row, int col) const;
  int64_t Int(size_t row, int col) const;
  double Real(size_t row, int col) const;
  std::string Text(size_t row, int col) const;

  // Backends fill results row by row.
  void AddRow(std::vector<SqlValue> row) { rows_.push_back(std::move(row)); }

 private:
  const SqlValue* Cell(size_t row, int col) const;
  std::vector<std::vector<SqlValue>> rows_;
};

enum class SqlDialect { kSqlite, kPostgres };

class SqlConnection {
 public:
  virtual ~SqlConnection() = default;
  virtual SqlDialect dialect() const = 0;
  // "sqlite PATH" or "postgresql HOST:PORT/DB" (never a password).
  virtual std::string Describe() const = 0;

  // Statements without parameters or results (DDL, COMMIT), several allowed.
  virtual absl::Status Exec(std::string_view sql) = 0;
  // One statement with $1..$N parameters; its rows (empty for writes).
  // Statements are prepared once per connection and reused.
  virtual absl::StatusOr<SqlResult> Query(std::string_view sql,
                                          const std::vector<SqlValue>& params) = 0;
  // Starts a write transaction. SQLite takes the write lock at once
  // (BEGIN IMMEDIATE) so that what the transaction reads first (job owners)
  // cannot change under it.
  virtual absl::Status Begin() = 0;

  // True when the last error was the connection's (server gone, network,
  // locked or full database), so the same statements may succeed later;
  // false for an error of the statement or its data.
  virtual bool LastErrorTransient() const = 0;

  // SQL expression for "now" on the database's clock, ns since the Unix
  // epoch: leases compare times written by different hosts, so they use
  // the database's clock, never the engines'.
  virtual std::string NowNs() const = 0;
  // Suffix of a SELECT that locks the rows it reads until the transaction
  // ends ("" for SQLite, whose write transaction locks the whole file).
  virtual std::string ForShare() const = 0;

  // One statement whose rows nobody reads (a write). Inside a transaction
  // a backend may send it without waiting for its answer (PostgreSQL
  // pipelines them: one round trip per batch, not per row); its error then
  // comes back from a later call of the same transaction, at the latest
  // from COMMIT, and fails the transaction as the statement would have.
  virtual absl::Status Run(std::string_view sql, const std::vector<SqlValue>& params) {
    absl::StatusOr<SqlResult> r = Query(sql, params);
    return r.ok() ? absl::OkStatus() : r.status();
  }
};

// True for `postgresql://...`, `postgres://...` and libpq key=value strings
// that name a host or database ("host=... dbname=...").
bool IsPostgresUrl(std::string_view db);

// Opens `db`: a PostgreSQL URL or a SQLite file path.
absl::StatusOr<std::unique_ptr<SqlConnection>> OpenSqlConnection(const std::string& db);
absl::StatusOr<std::unique_ptr<SqlConnection>> OpenSqlite(const std::string& path);
absl::StatusOr<std::unique_ptr<SqlConnection>> OpenPostgres(const std::string& url);

// `db` for log lines and errors: a PostgreSQL URL without its password.
std::string RedactDb(const std::string& db);

}  // namespace xpu::engine::history

#endif  // XPU_ENGINE_HISTORY_SQL_H_
