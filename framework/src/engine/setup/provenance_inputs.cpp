// The files components read through path keys (provenance.h, InputFileProvenance): collected at
// start-up beside the plugin hashes, compared at --resume. A teacher's weights or a CSV split
// replaced between a stop and --resume changes every later step, as a rebuilt plugin may
// (distillation trial F5: a negated teacher went unnoticed).
#include <toml++/toml.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "engine/setup/provenance.h"
#include "tp/framework/config/secrets.h"
#include "tp/framework/config/toml_text.h"
#include "tp/framework/error.h"
#include "tp/framework/util/bounded_text.h"
#include "tp/framework/util/sha256.h"

namespace tp {
namespace {

namespace fs = std::filesystem;

/// `table`'s path keys that name a regular file, appended to `out` unless its key is there
/// already (val built from [data.train] shares the table).
void add_files(const ComponentConfig* table, const PluginInstance* component, std::vector<InputFileProvenance>& out) {
  if (table == nullptr || component == nullptr) return;
  for (const KeySpec& spec : component->info().schema) {
    if (!spec.is_path) continue;
    const std::string key = table->key_path + "." + spec.path;
    const toml::node* node = table->options.get(spec.path);
    if (node == nullptr || !node->is_string()) continue;
    const std::string& value = node->as_string()->get();
    if (value.empty() || value.find("://") != std::string::npos) continue;
    if (std::any_of(out.begin(), out.end(), [&](const InputFileProvenance& f) { return f.key == key; })) continue;
    std::error_code error;
    if (!fs::is_regular_file(value, error)) continue; // a directory, a pattern, a missing path
    const auto size = fs::file_size(value, error);
    if (error) continue;
    const auto mtime = fs::last_write_time(value, error);
    if (error) continue;
    InputFileProvenance file{key, component->id(), redact_uri_credentials(value), static_cast<int64_t>(size), "",
                             std::chrono::duration_cast<std::chrono::nanoseconds>(mtime.time_since_epoch()).count()};
    if (file.size <= kMaxHashedInputBytes) {
      try {
        file.sha256 = sha256_file(value);
      } catch (const Error&) {
        continue; // unreadable: the component that needs it says so
      }
    }
    out.push_back(std::move(file));
  }
}

// A checkpoint may come from anywhere (--resume FILE): what it recorded is shown redacted again
// and cut to 4 KiB, as provenance segments are (a6ba712), never as written.
constexpr std::size_t kMaxRecordedText = 4096;
constexpr std::size_t kMaxRecordedFiles = 256;

std::string recorded_text(const toml::table& table, std::string_view key) {
  const auto* node = table.get_as<std::string>(key);
  return node != nullptr ? escape_control_characters(bounded_text(redact_uri_credentials(node->get()), kMaxRecordedText),
                                                     /*keep_newlines=*/false)
                         : std::string();
}

int64_t recorded_integer(const toml::table& table, std::string_view key) {
  const auto* node = table.get_as<int64_t>(key);
  return node != nullptr ? node->get() : -1;
}

bool looks_like_sha256(const std::string& text) {
  return text.size() == 64 &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

/// "2026-11-30T00:12:03Z" of a modification time in ns since the epoch.
std::string utc_of_ns(int64_t ns) {
  const std::time_t t = static_cast<std::time_t>(ns / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32] = {};
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

/// How `file` reads in a warning: "SHA-256 1a2b3c4d5e6f..., 1234 bytes", or by size and time
/// when it was too large to hash.
std::string file_identity(const std::string& sha256, int64_t size, int64_t mtime_ns) {
  if (looks_like_sha256(sha256)) return "SHA-256 " + sha256.substr(0, 12) + "..., " + std::to_string(size) + " bytes";
  return std::to_string(size) + " bytes, modified " + utc_of_ns(mtime_ns) + " (not hashed: over 1 GiB)";
}

constexpr std::string_view kConsequence =
    " The run continues with the file as it is now, so it is no longer an exact continuation: every step "
    "from here on uses the new contents (a teacher's other weights, a split's other rows), and the result "
    "differs from the one the checkpoint's run would have trained. To resume exactly, put back the file the "
    "checkpoint was written with (the hash or size above identifies it); if the change is intended, "
    "nothing needs doing: runtime.toml and this run's later checkpoints record the new file. A file the "
    "component itself writes (a log) changes by design and can be ignored here.";

}  // namespace

std::vector<InputFileProvenance> collect_input_files(const RunComponents& parts, const RunConfig& config) {
  std::vector<InputFileProvenance> files;
  add_files(dataset_table(config, "train"), parts.train_data.get(), files);
  add_files(dataset_table(config, "val"), parts.val_data.get(), files);
  add_files(dataset_table(config, "test"), parts.test_data.get(), files);
  add_files(&config.model, parts.model.get(), files);
  add_files(&config.loss, parts.loss.get(), files);
  for (size_t i = 0; i < parts.batch_transforms.size() && i < config.data.batch_transforms.size(); ++i)
    add_files(&config.data.batch_transforms[i], parts.batch_transforms[i].get(), files);
  for (size_t i = 0; i < parts.metrics.size() && i < config.metrics.size(); ++i)
    add_files(&config.metrics[i], parts.metrics[i].get(), files);
  for (size_t i = 0; i < parts.callbacks.size() && i < config.callbacks.size(); ++i)
    add_files(&config.callbacks[i], parts.callbacks[i].get(), files);
  return files;
}

std::vector<std::string> changed_input_files(const std::string& recorded_toml, const Provenance& now) {
  std::vector<std::string> warnings;
  if (recorded_toml.empty()) return warnings;
  toml::table recorded;
  try {
    recorded = parse_toml(recorded_toml);
  } catch (const toml::parse_error&) {
    return warnings; // unreadable provenance is no reason to refuse a resume
  }
  const toml::array* files = recorded.at_path("provenance.input_files").as_array();
  if (files == nullptr) return warnings; // a checkpoint from before this record
  std::size_t compared = 0;
  for (const toml::node& node : *files) {
    if (++compared > kMaxRecordedFiles) break;
    const toml::table* then = node.as_table();
    if (then == nullptr || then->get_as<std::string>("key") == nullptr) continue;
    const std::string key = then->get_as<std::string>("key")->get();
    const std::string then_sha = then->get_as<std::string>("sha256") ? then->get_as<std::string>("sha256")->get() : "";
    const int64_t then_size = recorded_integer(*then, "size");
    const int64_t then_mtime = recorded_integer(*then, "mtime_ns");
    const std::string shown_key = recorded_text(*then, "key");
    const std::string then_path = recorded_text(*then, "path");
    const std::string who = shown_key + " (" + recorded_text(*then, "component") + ")";
    const std::string then_identity = file_identity(then_sha, then_size, then_mtime);
    const auto current = std::find_if(now.input_files.begin(), now.input_files.end(),
                                      [&](const InputFileProvenance& f) { return f.key == key; });
    if (current == now.input_files.end()) {
      warnings.push_back("--resume: the file " + who + " read when the checkpoint was written, " + then_path + " (" +
                         then_identity + "), is gone: no regular file is there now, or the key no longer names "
                         "one." + std::string(kConsequence));
      continue;
    }
    // Hashed then and now: the bytes decide. Otherwise (a file over the limit either time) size
    // and modification time.
    const bool both_hashed = looks_like_sha256(then_sha) && !current->sha256.empty();
    const bool same = both_hashed ? then_sha == current->sha256 && then_size == current->size
                                  : then_size == current->size && then_mtime == current->mtime_ns;
    if (same) continue;
    const std::string now_path = escape_control_characters(current->path, /*keep_newlines=*/false);
    const std::string where = now_path == then_path ? then_path : then_path + ", now " + now_path + ",";
    warnings.push_back("--resume: the file " + who + " reads, " + where + " changed since the checkpoint was "
                       "written: " + then_identity + " then, " +
                       file_identity(current->sha256, current->size, current->mtime_ns) + " now." +
                       std::string(kConsequence));
  }
  return warnings;
}

}  // namespace tp
