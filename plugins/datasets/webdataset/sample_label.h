// The class id of a sample from its label member: a text integer (`.cls`, as webdataset writes
// labels) or a field of a JSON object (`.json`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tp::webdataset {

/// How the label member is read (config keys label_extension, json_label_key).
struct LabelFormat {
  std::string extension = "cls";  ///< the member's extension, lower-case
  bool json = false;              ///< true when the extension is "json" or ends with ".json"
  std::string json_key = "label"; ///< the JSON object's field that holds the class id
};

/// The class id in `data`, the label member's bytes. Text: an integer >= 0 of at most 18
/// digits, ASCII whitespace around it ignored ("3\n"). JSON: an object whose field
/// `format.json_key` is an integer >= 0. Throws tp::cpp::Failure(TP_ERR_IO) "webdataset:
/// <where>: ..." quoting (the start of) what the member holds otherwise; `where` names the shard
/// and the member.
int64_t parse_label(const std::vector<unsigned char>& data, const LabelFormat& format, const std::string& where);

}  // namespace tp::webdataset
