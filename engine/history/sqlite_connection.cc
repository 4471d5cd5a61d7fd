// The SQLite backend of sql.h: one file, WAL journal, statements prepared
// once per connection. `$N` parameters are rewritten to `?N`.
#include <sqlite3.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "engine/history/sql.h"

namespace xpu::engine::history {
namespace {

// "$12" -> "?12"; nothing else in our SQL uses '$'.
std::string ToSqliteParams(std::string_view sql) {
  std::string out(sql);
  for (size_t i = 0; i + 1 < out.size(); ++i) {
    if (out[i] == '$' && out[i + 1] >= '0' && out[i + 1] <= '9') out[i] = '?';
  }
  return out;
}

class SqliteConnection final : public SqlConnection {
 public:
  SqliteConnection(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  ~SqliteConnection() override {
    for (auto& [sql, s] : stmts_) sqlite3_finalize(s);
    sqlite3_close(db_);
  }

  SqlDialect dialect() const override { return SqlDialect::kSqlite; }
  std::string Describe() const override { return absl::StrCat("sqlite ", path_); }

  absl::Status Exec(std::string_view sql) override {
    char* err = nullptr;
    const std::string text(sql);
    const int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
    if (rc == SQLITE_OK) return absl::OkStatus();
    last_rc_ = rc;
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    return absl::InternalError(absl::StrCat("sqlite: ", msg));
  }

  absl::StatusOr<SqlResult> Query(std::string_view sql,
                                  const std::vector<SqlValue>& params) override {
    sqlite3_stmt* s = Prepare(sql);
    if (s == nullptr) return Error("prepare", sql);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    for (size_t i = 0; i < params.size(); ++i) {
      const int at = static_cast<int>(i + 1);
      const SqlValue& v = params[i];
      if (const int64_t* n = std::get_if<int64_t>(&v)) {
        sqlite3_bind_int64(s, at, *n);
      } else if (const double* d = std::get_if<double>(&v)) {
        sqlite3_bind_double(s, at, *d);
      } else if (const std::string* t = std::get_if<std::string>(&v)) {
        const std::string safe = SafeText(*t);
        sqlite3_bind_text(s, at, safe.data(), static_cast<int>(safe.size()), SQLITE_TRANSIENT);
      } else {
        sqlite3_bind_null(s, at);
      }
    }
    SqlResult out;
    while (true) {
      const int rc = sqlite3_step(s);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) {
        last_rc_ = rc;
        absl::Status st = Error("step", sql);
        sqlite3_reset(s);
        return st;
      }
      const int n = sqlite3_column_count(s);
      std::vector<SqlValue> row;
      row.reserve(static_cast<size_t>(n));
      for (int c = 0; c < n; ++c) {
        switch (sqlite3_column_type(s, c)) {
          case SQLITE_INTEGER:
            row.emplace_back(static_cast<int64_t>(sqlite3_column_int64(s, c)));
            break;
          case SQLITE_FLOAT:
            row.emplace_back(sqlite3_column_double(s, c));
            break;
          case SQLITE_NULL:
            row.emplace_back(std::monostate{});
            break;
          default: {
            const unsigned char* t = sqlite3_column_text(s, c);
            row.emplace_back(t ? std::string(reinterpret_cast<const char*>(t),
                                             static_cast<size_t>(sqlite3_column_bytes(s, c)))
                               : std::string());
          }
        }
      }
      out.AddRow(std::move(row));
    }
    sqlite3_reset(s);
    return out;
  }

  absl::Status Begin() override { return Exec("BEGIN IMMEDIATE;"); }

  bool LastErrorTransient() const override {
    switch (last_rc_ & 0xFF) {
      case SQLITE_BUSY:
      case SQLITE_LOCKED:
      case SQLITE_IOERR:
      case SQLITE_FULL:
      case SQLITE_CANTOPEN:
      case SQLITE_PROTOCOL:
        return true;
      default:
        return false;
    }
  }

  std::string NowNs() const override {
    // julianday('now') has millisecond resolution; leases need no more.
    return "CAST((julianday('now') - 2440587.5) * 86400000000000.0 AS INTEGER)";
  }
  std::string ForShare() const override { return ""; }

 private:
  sqlite3_stmt* Prepare(std::string_view sql) {
    auto it = stmts_.find(std::string(sql));
    if (it != stmts_.end()) return it->second;
    const std::string text = ToSqliteParams(sql);
    sqlite3_stmt* s = nullptr;
    const int rc = sqlite3_prepare_v2(db_, text.c_str(), -1, &s, nullptr);
    if (rc != SQLITE_OK) {
      last_rc_ = rc;
      sqlite3_finalize(s);
      return nullptr;
    }
    stmts_.emplace(std::string(sql), s);
    return s;
  }
  absl::Status Error(const char* what, std::string_view sql) {
    const std::string head(sql.substr(0, 60));
    return absl::InternalError(
        absl::StrCat("sqlite: ", what, ": ", sqlite3_errmsg(db_), " (in: ", head, "...)"));
  }

  sqlite3* db_;
  std::string path_;
  std::map<std::string, sqlite3_stmt*> stmts_;
  int last_rc_ = SQLITE_OK;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SqlConnection>> OpenSqlite(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK) {
    absl::Status st = absl::UnavailableError(absl::StrCat(
        "cannot open database ", path, ": ", db ? sqlite3_errmsg(db) : "out of memory"));
    sqlite3_close(db);
    return st;
  }
  sqlite3_busy_timeout(db, 5000);
  auto conn = std::make_unique<SqliteConnection>(db, path);
  if (absl::Status st = conn->Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;");
      !st.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot open database ", path, ": ", st.message()));
  }
  return conn;
}

}  // namespace xpu::engine::history
