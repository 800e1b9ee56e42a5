// What host predict names a webdataset sample by (ABI 1.13, sample_keys): the image file it was
// written from, where the sample's `json` member records one (`host shards write` writes
// {"label", "class", "source"}), else `<shard>:<key>`, as the bad-sample messages name it.
// A misclassified row then leads to its image, not to a tar member (data trial F5).
#pragma once

#include <string>
#include <vector>

namespace tp::webdataset {

/// How rows are named (the `sample_names` key).
enum class SampleNames {
  kSource,    ///< "source": the json member's `source`, else <shard>:<key>
  kShardKey,  ///< "shard_key": always <shard>:<key>
};

/// The `sample_names` key's value; throws tp::cpp::Failure(TP_ERR_CONFIG) naming the key otherwise.
SampleNames read_sample_names(const std::string& value);

/// The non-empty string `source` field of a sample's `json` member, or "" when the member is not a
/// JSON object, has no such field, or it is not a string (then the row keeps <shard>:<key>:
/// naming a row never fails a prediction).
std::string recorded_source(const std::vector<unsigned char>& json);

}  // namespace tp::webdataset
