#include "export_format.h"

#include <torch/version.h>

#include <cctype>
#include <string>
#include <vector>

#include "tp/framework/util/bounded_text.h"
#include "tp/infer/model.h"
#include "tp/version.h"

namespace tp::infer::detail {
namespace {

// An export's value as it may be printed: bounded, control characters escaped (a forged file's).
std::string shown(const std::string& value) { return escape_control_characters(bounded_text(value, 40), false); }

// "2.14.1+cu121" -> {2, 14, 1}; empty for a value that does not begin with digits and dots.
std::vector<long> version_numbers(const std::string& text) {
  std::vector<long> numbers;
  std::size_t at = 0;
  while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at])) != 0) {
    std::size_t end = at;
    while (end < text.size() && end - at < 9 && std::isdigit(static_cast<unsigned char>(text[end])) != 0) ++end;
    numbers.push_back(std::stol(text.substr(at, end - at)));
    if (end >= text.size() || text[end] != '.') break;
    at = end + 1;
  }
  return numbers;
}

}  // namespace

void check_export_format(const std::map<std::string, std::string>& metadata, const std::string& export_file) {
  const auto format = metadata.find("torchhost.format");
  if (format == metadata.end() || format->second == std::to_string(kReadableExportFormat)) return;
  const std::string readable = std::to_string(kReadableExportFormat);
  throw Error("tp::infer: the export '" + export_file + "' declares the metadata format '" + shown(format->second) +
                  "' (torchhost.format), and this library reads format " + readable + ": a key may mean "
                  "something else in it, so its model, preprocessing or classes would be misread. Open it with "
                  "the inference library of the torchhost that wrote it (the export's torchhost.version names "
                  "it), or export the run again with a host that writes format " + readable +
                  " (this library's version: " + tp::infer::version() + ").",
              Error::Kind::Setup);
}

void warn_about_export_versions(Logger& log, const std::map<std::string, std::string>& metadata,
                                const std::string& export_file) {
  const auto newer = [&](const char* key, const std::string& own, const char* what) {
    const auto entry = metadata.find(key);
    if (entry == metadata.end()) return;
    const std::vector<long> theirs = version_numbers(entry->second);
    if (theirs.empty() || theirs <= version_numbers(own)) return;
    log.write(tp::LogLevel::Warning, "tp::infer", "the export '" + export_file + "' was written by a host built with " + what + " " +
             shown(entry->second) + " (" + key + "), newer than this library's " + own + ". Its plugins may need "
             "what this build lacks (they are refused at load if so), and its answers may differ from the "
             "training's in the last bits; serve it with the inference library of that host's build.");
  };
  newer("torchhost.libtorch", TORCH_VERSION, "LibTorch");
  newer("torchhost.plugin_abi", std::to_string(TP_ABI_MAJOR) + "." + std::to_string(TP_ABI_MINOR), "plugin ABI");
}

}  // namespace tp::infer::detail
