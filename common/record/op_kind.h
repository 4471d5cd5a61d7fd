// common/record/op_kind.h — the one table of op-kind names.
//
// Every program that prints an op kind (the engine's metrics and
// diagnoses, timelines, `xpu-ring-dump`, the history tables) names it
// through this table, so one kind has one spelling everywhere: the
// enumerator of enum xpu_op_kind (include/xpu/record.h) without the XPU_OP_
// prefix, in lower case ("graph_launch", "sync_stream", "py_gc").
// tests/e2e_pipeline/pipeline_harness.py keeps a copy for the APIs it
// counts; op_kind_unittest.cc checks that copy against this table.
//
// Thread-safety: pure functions over constant data.
#ifndef XPU_COMMON_RECORD_OP_KIND_H_
#define XPU_COMMON_RECORD_OP_KIND_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace xpu::record {

struct OpKindEntry {
  uint32_t kind;          // a value of enum xpu_op_kind
  std::string_view name;  // its canonical name
};

// Every kind of enum xpu_op_kind except XPU_OP_NONE, in enum order.
const std::vector<OpKindEntry>& AllOpKinds();

// The canonical name of `kind`; empty when `kind` is not a value of enum
// xpu_op_kind (or is XPU_OP_NONE).
std::string_view KnownOpKindName(uint32_t kind);

// KnownOpKindName, or "op<N>" for a value the ABI does not define (a newer
// producer's kind, or a hostile one).
std::string OpKindName(uint32_t kind);

// True when `kind` is a value of enum xpu_op_kind other than XPU_OP_NONE.
bool IsKnownOpKind(uint32_t kind);

}  // namespace xpu::record

#endif  // XPU_COMMON_RECORD_OP_KIND_H_
