// common/timeline/private_output.cc — see private_output.h.
#include "common/timeline/private_output.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace xpu::timeline {

absl::Status MakePrivateDir(const std::string& dir) {
  if (mkdir(dir.c_str(), 0700) == 0) return absl::OkStatus();
  if (errno != EEXIST)
    return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", std::strerror(errno)));
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0)
    return absl::InternalError(absl::StrCat("cannot inspect ", dir, ": ", std::strerror(errno)));
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " exists and is not a directory (or is a symlink)"));
  }
  if (st.st_uid != geteuid()) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir, " belongs to another user; give a directory of your own (or a new name)"));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir, " is writable by group or others; give a directory only you may write"));
  }
  return absl::OkStatus();
}

absl::StatusOr<FILE*> OpenPrivateFile(const std::string& path) {
  const int fd =
      open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    if (errno == ELOOP)
      return absl::FailedPreconditionError(absl::StrCat(path, " is a symlink; not followed"));
    return absl::InternalError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  FILE* f = fdopen(fd, "wb");
  if (f == nullptr) {
    close(fd);
    return absl::InternalError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  return f;
}

absl::Status WritePrivateFile(const std::string& path, const std::string& data) {
  absl::StatusOr<FILE*> f = OpenPrivateFile(path);
  if (!f.ok()) return f.status();
  const bool wrote = std::fwrite(data.data(), 1, data.size(), *f) == data.size();
  const bool closed = std::fclose(*f) == 0;
  if (!wrote || !closed) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace xpu::timeline
