#include "model_files.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "tp/framework/util/bounded_text.h"
#include "tp/framework/util/sha256.h"
#include "tp/infer/model.h"

namespace tp::infer::detail {
namespace {

namespace fs = std::filesystem;

// A path as resolved as it can be: links of the parts that exist followed, `..` removed.
fs::path resolved(const fs::path& path) {
  std::error_code unresolved;
  fs::path out = fs::weakly_canonical(fs::absolute(path), unresolved);
  return unresolved ? fs::absolute(path).lexically_normal() : out;
}

// Whether `file` lies in `dir` or below it (both resolved).
bool is_below(const fs::path& file, const fs::path& dir) {
  const auto [dir_end, file_at] = std::mismatch(dir.begin(), dir.end(), file.begin(), file.end());
  return dir_end == dir.end() && file_at != file.end();
}

// The first digits of a regular file's SHA-256, for the log; never reads anything else (a FIFO).
std::string digest_of(const fs::path& file) {
  std::error_code status;
  if (!fs::is_regular_file(file, status)) return "none (no regular file)";
  try {
    return sha256_file(file).substr(0, 16) + "...";
  } catch (const std::exception&) {
    return "none (unreadable)";
  }
}

std::string shown(const std::string& text) { return escape_control_characters(bounded_text(text, 300), false); }

}  // namespace

void check_model_files(const ComponentConfig& config, const std::vector<KeySpec>& schema, const std::string& export_file,
                       bool allow_outside, Logger& log) {
  const fs::path dir = resolved(export_file).parent_path();
  for (const KeySpec& key : schema) {
    const auto* value = key.is_path ? config.options.get_as<std::string>(key.path) : nullptr;
    if (value == nullptr || value->get().empty()) continue;
    const fs::path file = resolved(value->get());
    const bool beside = is_below(file, dir);
    const std::string what = "'" + shown(file.string()) + "' (its model's `" + key.path + "`, " + config.component + ")";
    if (!beside && !allow_outside)
      throw Error("tp::infer: the export '" + shown(export_file) + "' names the file " + what + ", outside the "
                      "export's directory " + shown(dir.string()) + ". Its plugin would load it, and a model file "
                      "such as a TorchScript program is code this process runs: an export is taken for data, so "
                      "opening it is refused. For an export you trust (yours, of a TorchScript model, which names "
                      "the file the run trained with), set OpenOptions::allow_files_outside_export (C: "
                      "tp_infer_open_with and TP_INFER_OPEN_ALLOW_FILES_OUTSIDE_EXPORT); else do not open it.",
                  Error::Kind::Setup);
    const std::string digest = digest_of(file);
    const std::string line = "the export '" + shown(export_file) + "' has its model load the file " + what +
                             ", SHA-256 " + digest + ": code or data this process runs as the export says";
    if (beside) log.write(tp::LogLevel::Info, "tp::infer", line + ".");
    else log.write(tp::LogLevel::Warning, "tp::infer", line + ", outside the export's directory (OpenOptions::allow_files_outside_export).");
  }
}

}  // namespace tp::infer::detail
