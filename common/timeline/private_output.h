// common/timeline/private_output.h — where the CLI writes job data: a
// timeline dump's directory and files (records, traces, flame graphs,
// manifests) and evidence files.
//
// They hold another job's data only when the caller was allowed to read it,
// so they are private to the caller: a directory is created 0700, or, when
// it exists, must be a real directory (not a symlink) of the caller that no
// one else may write (else another local user could have planted it, or a
// symlink in it, in a shared place such as /tmp); files are created 0600
// with O_NOFOLLOW, so a symlink planted where a file goes is refused instead
// of followed.
//
// Thread-safety: pure functions.
#ifndef XPU_COMMON_TIMELINE_PRIVATE_OUTPUT_H_
#define XPU_COMMON_TIMELINE_PRIVATE_OUTPUT_H_

#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace xpu::timeline {

// Creates `dir` with mode 0700, or checks an existing one (above).
absl::Status MakePrivateDir(const std::string& dir);

// Opens `path` for writing (created 0600, truncated), never through a
// symlink; the caller fcloses it.
absl::StatusOr<FILE*> OpenPrivateFile(const std::string& path);

// Writes `data` to `path` as OpenPrivateFile does.
absl::Status WritePrivateFile(const std::string& path, const std::string& data);

}  // namespace xpu::timeline

#endif  // XPU_COMMON_TIMELINE_PRIVATE_OUTPUT_H_
