#include "sample_names.h"

#include <nlohmann/json.hpp>

#include "tp/cpp/guard.h"

namespace tp::webdataset {

SampleNames read_sample_names(const std::string& value) {
  if (value == "source") return SampleNames::kSource;
  if (value == "shard_key") return SampleNames::kShardKey;
  throw tp::cpp::Failure(TP_ERR_CONFIG, "webdataset: sample_names = \"" + value + "\" is none of \"source\" (the "
                                        "image file the sample's json member records, else <shard>:<key>) and "
                                        "\"shard_key\" (always <shard>:<key>)");
}

std::string recorded_source(const std::vector<unsigned char>& json) {
  const nlohmann::json parsed = nlohmann::json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) return "";
  const auto found = parsed.find("source");
  if (found == parsed.end() || !found->is_string()) return "";
  return found->get<std::string>();
}

}  // namespace tp::webdataset
