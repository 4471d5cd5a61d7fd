// sqlite_util — the small SQLite helpers the store and the history tables
// share: statement execution with absl::Status errors and a RAII prepared
// statement with 1-based positional binds.
//
// Thread-safety: a Stmt belongs to the thread that holds its connection
// (connections are opened SQLITE_OPEN_NOMUTEX and guarded by their owner).
#ifndef XPU_ENGINE_HISTORY_SQLITE_UTIL_H_
#define XPU_ENGINE_HISTORY_SQLITE_UTIL_H_

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace xpu::engine::history {

inline absl::Status SqlError(sqlite3* db, absl::string_view what) {
  return absl::InternalError(absl::StrCat("sqlite: ", what, ": ", sqlite3_errmsg(db)));
}

// Runs one or more statements without results.
inline absl::Status Exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return absl::InternalError(absl::StrCat("sqlite: ", msg));
  }
  return absl::OkStatus();
}

class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &s_, nullptr) != SQLITE_OK) s_ = nullptr;
  }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  bool ok() const { return s_ != nullptr; }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(s_, i, v);
    return *this;
  }
  Stmt& Bind(int i, uint64_t v) { return Bind(i, static_cast<int64_t>(v)); }
  Stmt& Bind(int i, int32_t v) { return Bind(i, static_cast<int64_t>(v)); }
  Stmt& Bind(int i, uint32_t v) { return Bind(i, static_cast<int64_t>(v)); }
  Stmt& Bind(int i, double v) {
    sqlite3_bind_double(s_, i, v);
    return *this;
  }
  Stmt& Bind(int i, std::string_view v) {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Bind(int i, const std::string& v) { return Bind(i, std::string_view(v)); }
  Stmt& Bind(int i, const char* v) { return Bind(i, std::string_view(v)); }
  // SQLITE_ROW -> true; SQLITE_DONE -> false; errors (and a statement that
  // failed to prepare) -> status.
  absl::StatusOr<bool> Step() {
    if (s_ == nullptr) return SqlError(db_, "prepare");
    int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return SqlError(db_, "step");
  }
  absl::Status Run() {
    absl::StatusOr<bool> r = Step();
    return r.ok() ? absl::OkStatus() : r.status();
  }
  int64_t Int(int col) { return sqlite3_column_int64(s_, col); }
  double Real(int col) { return sqlite3_column_double(s_, col); }
  std::string Text(int col) {
    const unsigned char* t = sqlite3_column_text(s_, col);
    return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
};

}  // namespace xpu::engine::history

#endif  // XPU_ENGINE_HISTORY_SQLITE_UTIL_H_
