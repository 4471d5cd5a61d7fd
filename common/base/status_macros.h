// common/base/status_macros.h — early return on an absl::Status error.
//
//   XPU_RETURN_IF_ERROR(store->Flush());
//   XPU_ASSIGN_OR_RETURN(std::vector<Row> rows, store->LoadRows(job));
//
// Both evaluate their expression once and return its error status
// unchanged from the enclosing function, which must return absl::Status or
// absl::StatusOr<T>.
#ifndef XPU_COMMON_BASE_STATUS_MACROS_H_
#define XPU_COMMON_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define XPU_RETURN_IF_ERROR(expr)                                 \
  do {                                                            \
    if (::absl::Status xpu_status_ = (expr); !xpu_status_.ok()) { \
      return xpu_status_;                                         \
    }                                                             \
  } while (false)

#define XPU_STATUS_CONCAT_INNER_(a, b) a##b
#define XPU_STATUS_CONCAT_(a, b) XPU_STATUS_CONCAT_INNER_(a, b)

// `lhs` may declare a variable ("auto x") or name an existing one.
#define XPU_ASSIGN_OR_RETURN(lhs, expr) \
  XPU_ASSIGN_OR_RETURN_IMPL_(XPU_STATUS_CONCAT_(xpu_statusor_, __LINE__), lhs, expr)

#define XPU_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr)    \
  auto statusor = (expr);                                  \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = std::move(statusor).value()

#endif  // XPU_COMMON_BASE_STATUS_MACROS_H_
