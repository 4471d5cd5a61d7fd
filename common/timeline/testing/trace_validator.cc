#include "common/timeline/testing/trace_validator.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/timeline/testing/perfetto_trace_subset.pb.h"

namespace xpu::timeline::testing {
namespace {

std::string ReadAll(const std::string& path, bool* ok) {
  std::ifstream f(path, std::ios::binary);
  *ok = static_cast<bool>(f);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void Err(ValidatedTrace* v, std::string e) {
  if (v->errors.size() < 1000) v->errors.push_back(std::move(e));
}

}  // namespace

std::string ValidatedTrace::ErrorText(size_t max) const {
  std::string o;
  for (size_t i = 0; i < errors.size() && i < max; ++i) absl::StrAppend(&o, errors[i], "\n");
  if (errors.size() > max) absl::StrAppend(&o, "... ", errors.size() - max, " more\n");
  return o;
}

ValidatedTrace ValidatePerfettoFile(const std::string& path) {
  ValidatedTrace v;
  bool ok = false;
  const std::string data = ReadAll(path, &ok);
  if (!ok) {
    Err(&v, "cannot read " + path);
    return v;
  }
  xpu_test::perfetto::Trace trace;
  if (!trace.ParseFromString(data)) {
    Err(&v, "not a valid perfetto.protos.Trace message");
    return v;
  }
  v.packets = trace.packet_size();
  // Pass 1: tracks.
  std::map<uint64_t, const xpu_test::perfetto::TrackDescriptor*> tracks;
  for (const auto& p : trace.packet()) {
    if (!p.has_track_descriptor()) continue;
    const auto& td = p.track_descriptor();
    if (!td.has_uuid() || td.uuid() == 0) Err(&v, "track descriptor without uuid");
    if (!tracks.emplace(td.uuid(), &td).second)
      Err(&v, absl::StrCat("duplicate track uuid ", td.uuid()));
    if (td.has_process()) {
      ++v.processes;
      v.process_names[td.process().pid()] = td.process().process_name();
    } else {
      ++v.tracks;
    }
  }
  std::map<uint64_t, int32_t> pid_of_track;
  for (const auto& [uuid, td] : tracks) {
    if (td->has_parent_uuid()) {
      auto it = tracks.find(td->parent_uuid());
      if (it == tracks.end()) {
        Err(&v, absl::StrCat("track ", uuid, " names missing parent ", td->parent_uuid()));
      } else if (it->second->has_process()) {
        pid_of_track[uuid] = it->second->process().pid();
      }
    }
  }
  // Pass 2: events, interning, in file order per sequence.
  struct Ev {
    uint64_t ts;
    size_t order;
    int type;
    uint64_t track;
  };
  std::vector<Ev> events;
  std::map<uint32_t, std::map<uint64_t, std::string>> names;      // seq -> iid -> name
  std::map<uint32_t, std::map<uint64_t, std::string>> arg_names;  // seq -> iid -> arg name
  std::map<uint32_t, bool> cleared;
  std::map<uint64_t, std::pair<int, int>> flows;  // id -> (events, terminating)
  for (size_t i = 0; i < static_cast<size_t>(trace.packet_size()); ++i) {
    const auto& p = trace.packet(i);
    const uint32_t seq = p.trusted_packet_sequence_id();
    if (p.sequence_flags() & 1) {
      cleared[seq] = true;
      names[seq].clear();
      arg_names[seq].clear();
    }
    if (p.has_interned_data()) {
      if (!cleared[seq])
        Err(&v, absl::StrCat("packet ", i, ": interned data before a state reset on seq ", seq));
      for (const auto& n : p.interned_data().event_names()) {
        if (n.iid() == 0) Err(&v, "event name with iid 0");
        names[seq][n.iid()] = n.name();
      }
      for (const auto& n : p.interned_data().debug_annotation_names())
        arg_names[seq][n.iid()] = n.name();
    }
    if (!p.has_track_event()) continue;
    const auto& te = p.track_event();
    if (!p.has_timestamp()) Err(&v, absl::StrCat("packet ", i, ": track event without timestamp"));
    if (tracks.count(te.track_uuid()) == 0) {
      Err(&v, absl::StrCat("packet ", i, ": event on undeclared track ", te.track_uuid()));
      continue;
    }
    const int type = te.type();
    if (type != 1 && type != 2 && type != 3)
      Err(&v, absl::StrCat("packet ", i, ": unexpected event type ", type));
    if (type == 1 || type == 3) {
      std::string name;
      if (te.has_name_iid()) {
        if (!(p.sequence_flags() & 2))
          Err(&v,
              absl::StrCat("packet ", i, ": interned name without SEQ_NEEDS_INCREMENTAL_STATE"));
        auto it = names[seq].find(te.name_iid());
        if (it == names[seq].end()) {
          Err(&v, absl::StrCat("packet ", i, ": name_iid ", te.name_iid(), " not interned on seq ",
                               seq));
        } else {
          name = it->second;
        }
      } else {
        name = te.name();
      }
      if (name.empty()) Err(&v, absl::StrCat("packet ", i, ": event without a name"));
      for (const auto& a : te.debug_annotations()) {
        const std::string arg = a.has_name_iid() ? arg_names[seq][a.name_iid()] : a.name();
        if (arg == "callsite" && a.has_string_value()) ++v.callsites[name + "|" + a.string_value()];
      }
      ++v.slices_by_name[name];
      ++v.events_by_pid[pid_of_track.count(te.track_uuid()) ? pid_of_track[te.track_uuid()] : -1];
      v.min_ts = std::min<uint64_t>(v.min_ts, p.timestamp());
      v.max_ts = std::max<uint64_t>(v.max_ts, p.timestamp());
      if (type == 1)
        ++v.slices;
      else
        ++v.instants;
    }
    for (uint64_t f : te.flow_ids()) ++flows[f].first;
    for (uint64_t f : te.terminating_flow_ids()) {
      ++flows[f].first;
      ++flows[f].second;
    }
    events.push_back(Ev{p.timestamp(), i, type, te.track_uuid()});
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const Ev& a, const Ev& b) { return a.ts < b.ts; });
  std::map<uint64_t, int> depth;
  for (const Ev& e : events) {
    if (e.type == 1) ++depth[e.track];
    if (e.type == 2 && --depth[e.track] < 0) {
      Err(&v, absl::StrCat("END without BEGIN on track ", e.track, " at ts ", e.ts));
      depth[e.track] = 0;
    }
  }
  for (const auto& [t, d] : depth) {
    if (d != 0) Err(&v, absl::StrCat("track ", t, ": ", d, " slices never end"));
  }
  for (const auto& [id, c] : flows) {
    if (c.first < 2) Err(&v, absl::StrCat("flow ", id, " has only ", c.first, " event(s)"));
    if (c.second != 1) Err(&v, absl::StrCat("flow ", id, " terminated ", c.second, " times"));
  }
  v.flows = flows.size();
  return v;
}

ValidatedTrace ValidateChromeJsonFile(const std::string& path) {
  ValidatedTrace v;
  bool ok = false;
  const std::string data = ReadAll(path, &ok);
  if (!ok) {
    Err(&v, "cannot read " + path);
    return v;
  }
  google::protobuf::Struct root;
  auto st = google::protobuf::util::JsonStringToMessage(data, &root);
  if (!st.ok()) {
    Err(&v, absl::StrCat("not valid JSON: ", st.ToString()));
    return v;
  }
  auto it = root.fields().find("traceEvents");
  if (it == root.fields().end() || !it->second.has_list_value()) {
    Err(&v, "no traceEvents array");
    return v;
  }
  std::map<std::string, std::pair<int, int>> flows;  // id -> (s, f)
  std::set<std::pair<int32_t, int32_t>> named_threads;
  std::vector<std::pair<int32_t, int32_t>> used_threads;
  size_t i = 0;
  for (const auto& ev : it->second.list_value().values()) {
    ++i;
    if (!ev.has_struct_value()) {
      Err(&v, absl::StrCat("event ", i, " is not an object"));
      continue;
    }
    const auto& f = ev.struct_value().fields();
    auto str = [&](const char* k) -> std::string {
      auto x = f.find(k);
      return x != f.end() && x->second.kind_case() == google::protobuf::Value::kStringValue
                 ? x->second.string_value()
                 : "";
    };
    auto num = [&](const char* k, bool* has) -> double {
      auto x = f.find(k);
      *has = x != f.end() && x->second.kind_case() == google::protobuf::Value::kNumberValue;
      return *has ? x->second.number_value() : 0;
    };
    const std::string ph = str("ph");
    bool has_pid, has_tid, has_ts, has_dur;
    const double pid = num("pid", &has_pid), tid = num("tid", &has_tid);
    num("ts", &has_ts);
    const double dur = num("dur", &has_dur);
    if (ph.empty() || !has_pid || !has_tid)
      Err(&v, absl::StrCat("event ", i, ": missing ph/pid/tid"));
    if (str("name").empty()) Err(&v, absl::StrCat("event ", i, ": missing name"));
    if (ph == "M") {
      auto a = f.find("args");
      if (a == f.end() || !a->second.has_struct_value())
        Err(&v, absl::StrCat("event ", i, ": metadata without args"));
      if (str("name") == "process_name") {
        ++v.processes;
        v.process_names[static_cast<int32_t>(pid)] =
            a->second.struct_value().fields().at("name").string_value();
      }
      if (str("name") == "thread_name") {
        ++v.tracks;
        named_threads.insert({static_cast<int32_t>(pid), static_cast<int32_t>(tid)});
      }
      continue;
    }
    if (!has_ts) Err(&v, absl::StrCat("event ", i, ": missing ts"));
    if (ph == "X") {
      if (!has_dur || dur < 0) Err(&v, absl::StrCat("event ", i, ": X without a valid dur"));
      ++v.slices;
    } else if (ph == "i") {
      ++v.instants;
    } else if (ph == "s" || ph == "t" || ph == "f") {
      const std::string id = str("id");
      if (id.empty()) Err(&v, absl::StrCat("event ", i, ": flow without id"));
      if (ph == "s") ++flows[id].first;
      if (ph == "f") ++flows[id].second;
      continue;
    } else {
      Err(&v, absl::StrCat("event ", i, ": unexpected ph '", ph, "'"));
      continue;
    }
    if (auto a = f.find("args"); a != f.end() && a->second.has_struct_value()) {
      const auto& args = a->second.struct_value().fields();
      auto c = args.find("callsite");
      if (c != args.end() && c->second.kind_case() == google::protobuf::Value::kStringValue) {
        ++v.callsites[str("name") + "|" + c->second.string_value()];
      }
    }
    ++v.slices_by_name[str("name")];
    ++v.events_by_pid[static_cast<int32_t>(pid)];
    used_threads.push_back({static_cast<int32_t>(pid), static_cast<int32_t>(tid)});
  }
  for (const auto& t : used_threads) {
    if (named_threads.count(t) == 0) {
      Err(&v, absl::StrCat("events on pid ", t.first, " tid ", t.second, " without a thread_name"));
      break;
    }
  }
  for (const auto& [id, c] : flows) {
    if (c.first != 1 || c.second != 1)
      Err(&v, absl::StrCat("flow ", id, ": ", c.first, " starts, ", c.second, " ends"));
  }
  v.flows = flows.size();
  return v;
}

}  // namespace xpu::timeline::testing
