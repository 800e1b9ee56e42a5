// The most bytes one sample may take in a shard, shared by the reader (sample_reader.h: a larger
// sample fails naming the shard before a byte of it is read or allocated) and the writer
// (shard_writer.h: refuses to write one the reader would refuse). plugins/datasets/webdataset/
// README.md, "Limits".
#pragma once

#include <cstdint>

namespace tp::webdataset {

/// 1 GiB of a sample's members: their headers, data and padding. Generous (an image of
/// max_image_pixels' default, 179 million pixels, is a few hundred MB even as an uncompressed
/// BMP) and far below what a damaged or hostile shard could claim (a member's size field reaches
/// 8 GiB in ustar, more with pax; a last sample used to run to the end of the file).
inline constexpr uint64_t kMaxSampleBytes = uint64_t{1} << 30;

}  // namespace tp::webdataset
