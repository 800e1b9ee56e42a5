// A run's earlier processes (docs/hardening.md, "Provenance"): a resumed process carries the
// checkpoint's lineage forward, so runtime.toml and its checkpoints name every plugin binary and
// command that trained the run, not only the last process's.
#include <toml++/toml.h>

#include <utility>

#include "engine/setup/provenance.h"
#include "tp/framework/config/secrets.h"
#include "tp/framework/config/toml_text.h"
#include "tp/framework/util/bounded_text.h"

namespace tp {
namespace {

/// The most characters of one recorded field, and the most plugins of one process, carried on: a
/// checkpoint may come from anyone, and what it holds is copied into every later checkpoint.
constexpr std::size_t kMaxSegmentText = 4096;
constexpr std::size_t kMaxSegmentPlugins = 64;

/// `table`'s string `key`, "" where it is absent or of another type (a checkpoint may come from
/// anyone: a wrong type costs that field, not the resume), at most kMaxSegmentText characters.
std::string text_of(const toml::table& table, const char* key) {
  const auto* value = table.get_as<std::string>(key);
  return value != nullptr ? bounded_text(value->get(), kMaxSegmentText) : std::string();
}

/// `table`'s integer `key`, -1 where it is absent, negative or of another type.
int64_t count_of(const toml::table& table, const char* key) {
  const auto* value = table.get_as<int64_t>(key);
  return value != nullptr && value->get() >= 0 ? value->get() : -1;
}

/// One process as a [provenance] table or a [[provenance.earlier]] entry records it; both share
/// these keys, so a checkpoint's top-level process reads as an earlier one.
ProvenanceSegment segment_of(const toml::table& table) {
  ProvenanceSegment segment;
  segment.started = text_of(table, "started");
  segment.hostname = text_of(table, "hostname");
  segment.host_version = text_of(table, "host_version");
  segment.libtorch = text_of(table, "libtorch");
  segment.cuda = text_of(table, "cuda");
  // Redacted again: a checkpoint written before command lines were, or another's given to
  // --resume FILE, may hold a URI's password, and runtime.toml goes to MLflow.
  segment.command_line = redact_uri_credentials(text_of(table, "command_line"));
  segment.resumed_step = count_of(table, "resumed_step");
  segment.resumed_epoch = count_of(table, "resumed_epoch");
  if (const toml::array* plugins = table.get_as<toml::array>("plugins"))
    for (const toml::node& node : *plugins)
      if (const toml::table* plugin = node.as_table(); plugin != nullptr && segment.plugins.size() < kMaxSegmentPlugins)
        segment.plugins.emplace_back(text_of(*plugin, "library"), text_of(*plugin, "sha256"));
  return segment;
}

}  // namespace

Provenance with_earlier_segments(Provenance now, const std::string& recorded_toml, int64_t resumed_step,
                                 int64_t resumed_epoch, std::size_t keep) {
  now.resumed_step = resumed_step;
  now.resumed_epoch = resumed_epoch;
  now.earlier.clear();
  now.earlier_dropped = 0;
  const toml::table* recorded = nullptr;
  toml::table parsed;
  if (!recorded_toml.empty()) {
    try {
      parsed = parse_toml(recorded_toml);
      recorded = parsed.at_path("provenance").as_table();
    } catch (const toml::parse_error&) {
      // unreadable provenance is no reason to refuse a resume; its process is counted below
    }
  }
  if (recorded == nullptr) {
    now.earlier_dropped = 1; // a process trained the checkpoint, but it recorded nothing we can list
    return now;
  }
  if (const auto* dropped = recorded->get_as<int64_t>("earlier_dropped"); dropped != nullptr && dropped->get() > 0)
    now.earlier_dropped = dropped->get();
  const toml::array* earlier = recorded->get_as<toml::array>("earlier");
  const std::size_t listed = earlier != nullptr ? earlier->size() : 0;
  // Only the newest keep - 1 of the checkpoint's list are read: a list of a million entries costs
  // no more than one of 64.
  const std::size_t skip = listed + 1 > keep ? listed + 1 - keep : 0;
  now.earlier_dropped += static_cast<int64_t>(skip);
  for (std::size_t i = skip; i < listed; ++i) {
    if (const toml::table* entry = (*earlier)[i].as_table()) now.earlier.push_back(segment_of(*entry));
    else ++now.earlier_dropped; // an entry that is no table names no process we can list
  }
  if (keep > 0) now.earlier.push_back(segment_of(*recorded));
  return now;
}

}  // namespace tp
