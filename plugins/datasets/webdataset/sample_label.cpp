#include "sample_label.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "tp/cpp/guard.h"

namespace tp::webdataset {
namespace {

using tp::cpp::Failure;

/// At most 40 bytes of `data` for a message, bytes outside printable ASCII as \xNN.
std::string quoted_start(const std::vector<unsigned char>& data) {
  std::string out = "'";
  for (std::size_t i = 0; i < data.size() && i < 40; ++i) {
    const unsigned char c = data[i];
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out += static_cast<char>(c);
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02X", c);
      out += escaped;
    }
  }
  return out + (data.size() > 40 ? "...'" : "'");
}

bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

int64_t text_label(const std::vector<unsigned char>& data, const std::string& where) {
  std::size_t begin = 0, end = data.size();
  while (begin < end && is_space(data[begin])) ++begin;
  while (end > begin && is_space(data[end - 1])) --end;
  const std::string text(data.begin() + static_cast<std::ptrdiff_t>(begin), data.begin() + static_cast<std::ptrdiff_t>(end));
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos)
    throw Failure(TP_ERR_IO, "webdataset: " + where + " holds " + quoted_start(data) +
                                 ", not a class id: a label member holds one integer >= 0 (as webdataset writes "
                                 "`.cls` members); fix the shard or set `label_extension` to the member that holds "
                                 "the class id");
  return std::stoll(text);
}

int64_t json_label(const std::vector<unsigned char>& data, const std::string& key, const std::string& where) {
  // No exceptions from the parser: a member that is not JSON is a bad sample, not a crash.
  const nlohmann::json doc = nlohmann::json::parse(data.begin(), data.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object())
    throw Failure(TP_ERR_IO, "webdataset: " + where + " holds " + quoted_start(data) +
                                 ", not a JSON object; fix the shard or set `label_extension`");
  const auto field = doc.find(key);
  if (field == doc.end())
    throw Failure(TP_ERR_IO, "webdataset: " + where + " has no field \"" + key +
                                 "\"; set `json_label_key` to the field that holds the class id");
  // JSON numbers parse as unsigned when >= 0: the largest class id kept is 2^62, far past any.
  const bool class_id = field->is_number_unsigned() ? field->get<uint64_t>() <= (uint64_t{1} << 62)
                                                    : field->is_number_integer() && field->get<int64_t>() >= 0;
  if (!class_id) {
    std::string shown = field->dump();
    if (shown.size() > 40) shown = shown.substr(0, 40) + "...";
    throw Failure(TP_ERR_IO, "webdataset: " + where + ": its field \"" + key + "\" is " + shown +
                                 ", not a class id (an integer >= 0)");
  }
  return field->get<int64_t>();
}

}  // namespace

int64_t parse_label(const std::vector<unsigned char>& data, const LabelFormat& format, const std::string& where) {
  return format.json ? json_label(data, format.json_key, where) : text_label(data, where);
}

}  // namespace tp::webdataset
