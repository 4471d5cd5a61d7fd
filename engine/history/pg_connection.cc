// The PostgreSQL backend of sql.h, over libpq (Debian libpq5). Parameters
// and results travel as text; statements are prepared once per session.
// Writes inside a transaction (Run) are pipelined: sent without waiting,
// their answers read in one go at the next call that needs an answer
// (Query, Exec: COMMIT at the latest) or every kPipelineDepth statements,
// so a transaction of N rows costs a few round trips instead of N.
// A broken session is reset on the next call (its prepared statements go
// with it); errors of the connection and of the server's resources count
// as transient, so the store's writer keeps its rows and tries again.
#include <libpq-fe.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/history/sql.h"

namespace xpu::engine::history {
namespace {

// SQLSTATE classes after which the same statements may succeed later:
// 08 connection exception, 53 insufficient resources, 57 operator
// intervention (shutdown, crash recovery), 40001/40P01 serialization
// failure and deadlock.
bool TransientState(const char* state) {
  if (state == nullptr) return false;
  const std::string s(state);
  return s.rfind("08", 0) == 0 || s.rfind("53", 0) == 0 || s.rfind("57", 0) == 0 ||
         s == "40001" || s == "40P01";
}

std::string ParamText(const SqlValue& v, bool* is_null) {
  *is_null = false;
  if (const int64_t* n = std::get_if<int64_t>(&v)) return std::to_string(*n);
  if (const double* d = std::get_if<double>(&v)) {
    if (std::isnan(*d)) return "NaN";
    if (std::isinf(*d)) return *d > 0 ? "Infinity" : "-Infinity";
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%.17g", *d);
    return buf;
  }
  if (const std::string* s = std::get_if<std::string>(&v)) return SafeText(*s);
  *is_null = true;
  return "";
}

// Statements in flight before their answers are read: bounds what either
// side buffers (answers of writes are a few dozen bytes each).
constexpr size_t kPipelineDepth = 512;

class PgConnection final : public SqlConnection {
 public:
  explicit PgConnection(PGconn* conn) : conn_(conn) {
    describe_ = absl::StrCat("postgresql ", PQhost(conn_) ? PQhost(conn_) : "", ":",
                             PQport(conn_) ? PQport(conn_) : "", "/",
                             PQdb(conn_) ? PQdb(conn_) : "");
  }
  ~PgConnection() override { PQfinish(conn_); }

  SqlDialect dialect() const override { return SqlDialect::kPostgres; }
  std::string Describe() const override { return describe_; }

  absl::Status Exec(std::string_view sql) override {
    const std::string text(sql);
    if (absl::Status st = Drain(); !st.ok() && text != "ROLLBACK;") return st;
    if (absl::Status st = EnsureConnected(); !st.ok()) return st;
    PGresult* r = PQexec(conn_, text.c_str());
    absl::Status st = Check(r, text);
    PQclear(r);
    return st;
  }

  absl::StatusOr<SqlResult> Query(std::string_view sql,
                                  const std::vector<SqlValue>& params) override {
    if (absl::Status st = Drain(); !st.ok()) return st;
    // A session that died while idle (server restarted) is re-established
    // and the statement sent once more; inside a transaction the caller
    // must start over, so the error goes back.
    const bool idle = PQtransactionStatus(conn_) == PQTRANS_IDLE;
    absl::StatusOr<SqlResult> r = QueryOnce(sql, params);
    if (!r.ok() && idle && transient_ && PQtransactionStatus(conn_) != PQTRANS_INTRANS &&
        PQtransactionStatus(conn_) != PQTRANS_INERROR) {
      PQreset(conn_);
      prepared_.clear();
      r = QueryOnce(sql, params);
    }
    return r;
  }

  // Inside a transaction: sent, answered at the next Drain.
  absl::Status Run(std::string_view sql, const std::vector<SqlValue>& params) override {
    if (!pipelined_ && PQtransactionStatus(conn_) != PQTRANS_INTRANS) {
      absl::StatusOr<SqlResult> r = Query(sql, params);
      return r.ok() ? absl::OkStatus() : r.status();
    }
    const std::string text(sql);
    if (prepared_.find(text) == prepared_.end()) {
      // Preparing waits for its answer, which pipeline mode does not allow.
      if (absl::Status st = Drain(); !st.ok()) return st;
    }
    std::string name;
    if (absl::Status st = Prepare(text, params.size(), &name); !st.ok()) return st;
    if (!pipelined_) {
      if (PQenterPipelineMode(conn_) != 1) return Failed("cannot pipeline", text);
      pipelined_ = true;
    }
    Bound b(params);
    if (PQsendQueryPrepared(conn_, name.c_str(), static_cast<int>(params.size()), b.ptrs.data(),
                            nullptr, nullptr, 0) != 1) {
      absl::Status st = Failed("cannot send", text);
      Drain().IgnoreError();
      return st;
    }
    in_flight_.push_back(text.substr(0, 60));
    if (in_flight_.size() >= kPipelineDepth) return Drain();
    return absl::OkStatus();
  }

  absl::StatusOr<SqlResult> QueryOnce(std::string_view sql, const std::vector<SqlValue>& params) {
    if (absl::Status st = EnsureConnected(); !st.ok()) return st;
    const std::string text(sql);
    std::string name;
    if (absl::Status st = Prepare(text, params.size(), &name); !st.ok()) return st;
    Bound b(params);
    PGresult* r = PQexecPrepared(conn_, name.c_str(), static_cast<int>(params.size()),
                                 b.ptrs.data(), nullptr, nullptr, 0);
    absl::Status st = Check(r, text);
    if (!st.ok()) {
      PQclear(r);
      return st;
    }
    SqlResult out;
    const int rows = PQntuples(r), cols = PQnfields(r);
    for (int i = 0; i < rows; ++i) {
      std::vector<SqlValue> row;
      row.reserve(static_cast<size_t>(cols));
      for (int c = 0; c < cols; ++c) {
        if (PQgetisnull(r, i, c)) {
          row.emplace_back(std::monostate{});
        } else {
          row.emplace_back(std::string(PQgetvalue(r, i, c), static_cast<size_t>(PQgetlength(r, i, c))));
        }
      }
      out.AddRow(std::move(row));
    }
    PQclear(r);
    return out;
  }

  absl::Status Begin() override { return Exec("BEGIN;"); }
  bool LastErrorTransient() const override { return transient_; }
  std::string NowNs() const override {
    return "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000000 AS BIGINT)";
  }
  std::string ForShare() const override { return " FOR SHARE"; }

 private:
  // Parameters as libpq wants them (text, nullptr for NULL).
  struct Bound {
    explicit Bound(const std::vector<SqlValue>& params)
        : values(params.size()), ptrs(params.size()) {
      for (size_t i = 0; i < params.size(); ++i) {
        bool null = false;
        values[i] = ParamText(params[i], &null);
        ptrs[i] = null ? nullptr : values[i].c_str();
      }
    }
    std::vector<std::string> values;
    std::vector<const char*> ptrs;
  };

  // Reads the answers of the pipelined statements and leaves pipeline
  // mode; the first statement's error, if any (the later ones were then
  // skipped by the server, and the transaction is aborted).
  absl::Status Drain() {
    if (!pipelined_) return absl::OkStatus();
    absl::Status first;
    if (PQpipelineSync(conn_) != 1) first = Failed("cannot sync", in_flight_.front());
    size_t answered = 0;
    int nulls = 0;
    while (first.ok() || PQstatus(conn_) == CONNECTION_OK) {
      PGresult* r = PQgetResult(conn_);
      if (r == nullptr) {
        // One NULL ends each statement's answer; two in a row: nothing more comes.
        if (++nulls > 1 || PQstatus(conn_) != CONNECTION_OK) break;
        continue;
      }
      nulls = 0;
      const ExecStatusType s = PQresultStatus(r);
      if (s == PGRES_PIPELINE_SYNC) {
        PQclear(r);
        break;
      }
      if (s != PGRES_PIPELINE_ABORTED && first.ok()) {
        first = Check(r, answered < in_flight_.size() ? in_flight_[answered] : "pipelined write");
      }
      answered++;
      PQclear(r);
    }
    if (PQexitPipelineMode(conn_) != 1 && first.ok()) {
      first = Failed("cannot leave pipeline mode", "pipelined write");
    }
    pipelined_ = PQpipelineStatus(conn_) != PQ_PIPELINE_OFF;
    in_flight_.clear();
    return first;
  }

  // An error of libpq itself (no server answer): the connection's.
  absl::Status Failed(const std::string& what, const std::string& sql) {
    transient_ = true;
    std::string msg = PQerrorMessage(conn_);
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    return absl::UnavailableError(
        absl::StrCat("postgresql: ", what, ": ", msg, " (in: ", sql.substr(0, 60), "...)"));
  }

  // A session lost since the last call is re-established first; prepared
  // statements do not survive that.
  absl::Status EnsureConnected() {
    if (PQstatus(conn_) == CONNECTION_OK) return absl::OkStatus();
    PQreset(conn_);
    prepared_.clear();
    if (PQstatus(conn_) == CONNECTION_OK) return absl::OkStatus();
    transient_ = true;
    return absl::UnavailableError(
        absl::StrCat("postgresql: cannot reach ", describe_, ": ", PQerrorMessage(conn_)));
  }

  absl::Status Prepare(const std::string& sql, size_t nparams, std::string* name) {
    auto it = prepared_.find(sql);
    if (it != prepared_.end()) {
      *name = it->second;
      return absl::OkStatus();
    }
    std::string n = absl::StrCat("xpu_", next_++);
    PGresult* r = PQprepare(conn_, n.c_str(), sql.c_str(), static_cast<int>(nparams), nullptr);
    absl::Status st = Check(r, sql);
    PQclear(r);
    if (!st.ok()) return st;
    prepared_.emplace(sql, n);
    *name = n;
    return absl::OkStatus();
  }

  absl::Status Check(PGresult* r, const std::string& sql) {
    const ExecStatusType s = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK || s == PGRES_EMPTY_QUERY) {
      transient_ = false;
      return absl::OkStatus();
    }
    const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
    // An error without SQLSTATE comes from libpq, not from the server: the
    // connection failed (libpq may only mark it bad on the next call).
    transient_ = PQstatus(conn_) != CONNECTION_OK || state == nullptr || TransientState(state);
    std::string msg = r ? PQresultErrorMessage(r) : PQerrorMessage(conn_);
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    return absl::InternalError(absl::StrCat("postgresql: ", msg, state ? " [" : "",
                                            state ? state : "", state ? "]" : "", " (in: ",
                                            sql.substr(0, 60), "...)"));
  }

  PGconn* conn_;
  std::string describe_;
  std::map<std::string, std::string> prepared_;  // SQL -> statement name
  int next_ = 0;
  bool transient_ = false;
  bool pipelined_ = false;
  std::vector<std::string> in_flight_;  // the pipelined statements' text, for errors
};

}  // namespace

absl::StatusOr<std::unique_ptr<SqlConnection>> OpenPostgres(const std::string& url) {
  // Defaults first: what the URL names itself overrides them.
  const char* keys[] = {"connect_timeout", "fallback_application_name", "dbname", nullptr};
  const char* values[] = {"10", "xpu-engine", url.c_str(), nullptr};
  PGconn* conn = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (conn == nullptr) return absl::ResourceExhaustedError("postgresql: out of memory");
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(conn);
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    PQfinish(conn);
    return absl::UnavailableError(
        absl::StrCat("cannot connect to ", RedactDb(url), ": ", msg));
  }
  // Quiet NOTICEs (CREATE TABLE IF NOT EXISTS ...) instead of libpq's stderr default.
  PQsetNoticeProcessor(conn, [](void*, const char*) {}, nullptr);
  return std::unique_ptr<SqlConnection>(new PgConnection(conn));
}

}  // namespace xpu::engine::history
