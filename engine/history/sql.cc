#include "engine/history/sql.h"

#include <cstdlib>
#include <regex>

#include "absl/strings/str_cat.h"

namespace xpu::engine::history {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence at s[i], 0 when it is not one.
size_t Utf8Length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const auto cont = [&](size_t k) { return k < s.size() && (b(k) & 0xC0) == 0x80; };
  const unsigned char c = b(i);
  if (c >= 0x01 && c <= 0x7F) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(i + 1) || !cont(i + 2)) return 0;
    if (c == 0xE0 && b(i + 1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(i + 1) >= 0xA0) return 0;  // surrogates
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(i + 1) || !cont(i + 2) || !cont(i + 3)) return 0;
    if (c == 0xF0 && b(i + 1) < 0x90) return 0;  // overlong
    if (c == 0xF4 && b(i + 1) >= 0x90) return 0;  // > U+10FFFF
    return 4;
  }
  return 0;  // NUL, stray continuation, 0xC0/0xC1, 0xF5..0xFF
}

}  // namespace

std::string SafeText(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = Utf8Length(s, i);
    if (n == 0) break;
    i += n;
  }
  if (i == s.size()) return std::string(s);
  std::string out(s.substr(0, i));
  while (i < s.size()) {
    const size_t n = Utf8Length(s, i);
    if (n == 0) {
      out.append(kReplacement);
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

const SqlValue* SqlResult::Cell(size_t row, int col) const {
  if (row >= rows_.size() || col < 0 || static_cast<size_t>(col) >= rows_[row].size())
    return nullptr;
  return &rows_[row][static_cast<size_t>(col)];
}

bool SqlResult::IsNull(size_t row, int col) const {
  const SqlValue* v = Cell(row, col);
  return v == nullptr || std::holds_alternative<std::monostate>(*v);
}

int64_t SqlResult::Int(size_t row, int col) const {
  const SqlValue* v = Cell(row, col);
  if (v == nullptr) return 0;
  if (const int64_t* i = std::get_if<int64_t>(v)) return *i;
  if (const double* d = std::get_if<double>(v)) return static_cast<int64_t>(*d);
  if (const std::string* s = std::get_if<std::string>(v)) {
    return static_cast<int64_t>(std::strtoll(s->c_str(), nullptr, 10));
  }
  return 0;
}

double SqlResult::Real(size_t row, int col) const {
  const SqlValue* v = Cell(row, col);
  if (v == nullptr) return 0;
  if (const double* d = std::get_if<double>(v)) return *d;
  if (const int64_t* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
  if (const std::string* s = std::get_if<std::string>(v)) return std::strtod(s->c_str(), nullptr);
  return 0;
}

std::string SqlResult::Text(size_t row, int col) const {
  const SqlValue* v = Cell(row, col);
  if (v == nullptr) return "";
  if (const std::string* s = std::get_if<std::string>(v)) return *s;
  if (const int64_t* i = std::get_if<int64_t>(v)) return std::to_string(*i);
  if (const double* d = std::get_if<double>(v)) return absl::StrCat(*d);
  return "";
}

bool IsPostgresUrl(std::string_view db) {
  if (db.rfind("postgresql://", 0) == 0 || db.rfind("postgres://", 0) == 0) return true;
  // libpq's key=value form: "host=/run/pg dbname=xpu user=xpu".
  for (const std::string key : {"host=", "hostaddr=", "dbname=", "service="}) {
    if (db.rfind(key, 0) == 0 || db.find(" " + key) != std::string_view::npos) return true;
  }
  return false;
}

absl::StatusOr<std::unique_ptr<SqlConnection>> OpenSqlConnection(const std::string& db) {
  if (IsPostgresUrl(db)) return OpenPostgres(db);
  return OpenSqlite(db);
}

std::string RedactDb(const std::string& db) {
  if (!IsPostgresUrl(db)) return db;
  // postgresql://user:secret@host/db -> postgresql://user:***@host/db;
  // password=secret -> password=***.
  static const std::regex kUrlPassword(R"(^(postgres(ql)?://[^:/@?]*):[^@/?]*@)");
  static const std::regex kKeyPassword(R"((password\s*=\s*)('[^']*'|[^&\s]+))");
  std::string out = std::regex_replace(db, kUrlPassword, "$1:***@");
  out = std::regex_replace(out, kKeyPassword, "$1***");
  return out;
}

}  // namespace xpu::engine::history
