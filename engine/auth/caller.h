// engine/auth/caller.h — who is calling the engine, and what the caller may
// do (docs/security.md).
//
// Permissions: read (a job's status, ranks, diagnoses, reports), act (what
// touches a job's processes: stacks, debugger, profiling windows, timeline
// dumps from the daemons), admin (calibrations, history) and ingest (a
// daemon's stream). A local user (identified by the kernel through the
// engine's identity socket) reads, acts and ingests for the jobs of its own
// uid; root and members of the admin group do everything on every job.
// Role credentials (per-role tokens, or client certificates named
// xpu-read / xpu-act / xpu-admin / xpu-ingest) hold their role on every
// job; act includes read, admin includes act. The shared --token-file
// holds every role.
//
// Thread-safety: plain values.
#ifndef XPU_ENGINE_AUTH_CALLER_H_
#define XPU_ENGINE_AUTH_CALLER_H_

#include <cstdint>
#include <string>

#include "xpu/v1/ingest.pb.h"

namespace xpu::engine::auth {

enum Permission : uint32_t {
  kRead = 1u << 0,
  kAct = 1u << 1,
  kAdmin = 1u << 2,
  kIngest = 1u << 3,
  kAll = kRead | kAct | kAdmin | kIngest,
};

struct Caller {
  std::string name = "anonymous";  // "uid 1000", "role act", "certificate xpu-admin", ...
  int64_t uid = -1;                // a local user's uid; -1 otherwise
  bool all_jobs = false;           // permissions hold for every job, not only uid's
  uint32_t permissions = 0;        // Permission bits

  bool Has(Permission p) const { return (permissions & p) == p; }
  // `p` on a job whose processes run as `owner_uid` (-1: unknown).
  bool MayOnJob(Permission p, int64_t owner_uid) const {
    return Has(p) && (all_jobs || (uid >= 0 && owner_uid == uid));
  }
};

// What the daemons are told about the caller of a command.
xpu::v1::CommandCaller ToCommandCaller(const Caller& c);
// The engine acting on its own (hang evidence, automatic profiling).
xpu::v1::CommandCaller EngineCaller();

}  // namespace xpu::engine::auth

#endif  // XPU_ENGINE_AUTH_CALLER_H_
