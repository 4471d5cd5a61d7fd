// common/record/op_kind.cc — see op_kind.h.
#include "common/record/op_kind.h"

#include "xpu/record.h"

namespace xpu::record {

const std::vector<OpKindEntry>& AllOpKinds() {
  static const auto* kinds = new std::vector<OpKindEntry>{
      {XPU_OP_KERNEL, "kernel"},
      {XPU_OP_GEMM, "gemm"},
      {XPU_OP_GRAPH_LAUNCH, "graph_launch"},
      {XPU_OP_MEMCPY, "memcpy"},
      {XPU_OP_ALLREDUCE, "allreduce"},
      {XPU_OP_ALLGATHER, "allgather"},
      {XPU_OP_REDUCESCATTER, "reducescatter"},
      {XPU_OP_BROADCAST, "broadcast"},
      {XPU_OP_REDUCE, "reduce"},
      {XPU_OP_ALLTOALL, "alltoall"},
      {XPU_OP_GATHER, "gather"},
      {XPU_OP_SCATTER, "scatter"},
      {XPU_OP_SEND, "send"},
      {XPU_OP_RECV, "recv"},
      {XPU_OP_SYNC_STREAM, "sync_stream"},
      {XPU_OP_SYNC_DEVICE, "sync_device"},
      {XPU_OP_SYNC_EVENT, "sync_event"},
      {XPU_OP_COMM_INIT, "comm_init"},
      {XPU_OP_COMM_DESTROY, "comm_destroy"},
      {XPU_OP_PY_GC, "py_gc"},
      {XPU_OP_PY_DATALOADER, "py_dataloader"},
      {XPU_OP_PY_SYNC, "py_sync"},
      {XPU_OP_PY_OPTIMIZER, "py_optimizer"},
      {XPU_OP_PY_CHECKPOINT, "py_checkpoint"},
      {XPU_OP_PY_API, "py_api"},
      {XPU_OP_STEP, "step"},
      {XPU_OP_ANNOTATION, "annotation"},
      {XPU_OP_PY_CALLSITE, "py_callsite"},
  };
  return *kinds;
}

std::string_view KnownOpKindName(uint32_t kind) {
  // Kinds are small (< 96): a direct-indexed copy of the table.
  static const auto* by_kind = [] {
    auto* v = new std::vector<std::string_view>(128);
    for (const OpKindEntry& k : AllOpKinds()) (*v)[k.kind] = k.name;
    return v;
  }();
  return kind < by_kind->size() ? (*by_kind)[kind] : std::string_view();
}

std::string OpKindName(uint32_t kind) {
  const std::string_view name = KnownOpKindName(kind);
  return name.empty() ? "op" + std::to_string(kind) : std::string(name);
}

bool IsKnownOpKind(uint32_t kind) { return !KnownOpKindName(kind).empty(); }

}  // namespace xpu::record
