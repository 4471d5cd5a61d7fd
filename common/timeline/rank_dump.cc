#include "common/timeline/rank_dump.h"

#include <sys/stat.h>

#include <dirent.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/wire/signature.h"
#include "common/timeline/private_output.h"

namespace xpu::timeline {

std::string RankDump::Label() const {
  return rank >= 0 ? absl::StrCat("rank ", rank) : absl::StrCat("pid ", pid, "@", host);
}

analysis::OpSig ToOpSig(const xpu::v1::Signature& s) {
  return analysis::OpSigFromAbi(wire::SignatureFromWire(s), s.name());
}

absl::StatusOr<RankDump> FromProcessBatch(xpu::v1::ProcessBatch pb) {
  if (pb.records().size() % sizeof(xpu_record_v1) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("records blob of ", pb.records().size(), " bytes is not a multiple of 32"));
  }
  RankDump d;
  d.rank = pb.identity().rank();
  d.host = pb.identity().host();
  d.pid = pb.identity().pid();
  d.job = pb.identity().job();
  d.exited = pb.exited();
  d.process_key = pb.process_key();
  for (const xpu::v1::Signature& s : pb.signatures()) {
    if (s.id() == 0) continue;
    d.sigs[s.id()] = ToOpSig(s);
  }
  d.packed = std::move(*pb.mutable_records());
  return d;
}

analysis::RankTrace ToRankTrace(const RankDump& d, int64_t offset_ns) {
  analysis::RankTrace t;
  t.rank = d.rank;
  t.host = d.host;
  t.sigs = d.sigs;
  const size_t n = d.size();
  t.ops.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const xpu_record_v1 r = d.Record(i);
    auto it = d.sigs.find(r.sig_id);
    if (it == d.sigs.end()) continue;
    t.ops.push_back(analysis::OpFromRecord(r, it->second.kind, offset_ns));
  }
  t.Sort();
  return t;
}

namespace {

// Job data: private directories and files (private_output.h).
absl::Status MakeDir(const std::string& p) { return MakePrivateDir(p); }

}  // namespace

absl::StatusOr<uint64_t> WriteRaw(const std::string& dir, const xpu::v1::ProcessBatch& pb) {
  XPU_RETURN_IF_ERROR(MakeDir(dir));
  const std::string raw = dir + "/raw";
  XPU_RETURN_IF_ERROR(MakeDir(raw));
  const auto& id = pb.identity();
  std::string name = id.rank() >= 0 ? absl::StrCat("rank-", id.rank())
                                    : absl::StrCat("pid-", id.pid(), "-", pb.process_key());
  const std::string path = absl::StrCat(raw, "/", name, ".xpb");
  XPU_ASSIGN_OR_RETURN(FILE * f, OpenPrivateFile(path));
  const bool wrote = pb.SerializeToFileDescriptor(fileno(f));
  if (std::fclose(f) != 0 || !wrote)
    return absl::InternalError(absl::StrCat("cannot write ", path));
  return static_cast<uint64_t>(pb.ByteSizeLong());
}

absl::StatusOr<std::vector<RankDump>> ReadRawDir(const std::string& dir) {
  const std::string raw = dir + "/raw";
  DIR* dp = opendir(raw.c_str());
  if (dp == nullptr)
    return absl::NotFoundError(absl::StrCat("no dump in ", dir, " (", raw, " missing)"));
  std::vector<std::string> files;
  while (dirent* e = readdir(dp)) {
    std::string n = e->d_name;
    if (absl::EndsWith(n, ".xpb")) files.push_back(raw + "/" + n);
  }
  closedir(dp);
  std::vector<RankDump> out;
  for (const std::string& path : files) {
    std::ifstream f(path, std::ios::binary);
    xpu::v1::ProcessBatch pb;
    if (!f || !pb.ParseFromIstream(&f))
      return absl::DataLossError(absl::StrCat("cannot parse ", path));
    absl::StatusOr<RankDump> d = FromProcessBatch(std::move(pb));
    if (!d.ok()) return absl::DataLossError(absl::StrCat(path, ": ", d.status().message()));
    out.push_back(std::move(*d));
  }
  if (out.empty()) return absl::NotFoundError(absl::StrCat("no process files in ", raw));
  SortRanks(&out);
  return out;
}

void SortRanks(std::vector<RankDump>* ranks) {
  std::sort(ranks->begin(), ranks->end(), [](const RankDump& a, const RankDump& b) {
    const bool ra = a.rank >= 0, rb = b.rank >= 0;
    if (ra != rb) return ra;
    if (a.rank != b.rank) return a.rank < b.rank;
    return a.pid < b.pid;
  });
}

}  // namespace xpu::timeline
