#include "check_sample_choice.h"

#include <algorithm>
#include <charconv>
#include <system_error>

#include "tp/framework/data/sampler.h"
#include "tp/framework/error.h"

namespace tp::detail {
namespace {

constexpr uint64_t kRandomIndices = 6; // by default: the first, the last and these many hashed

}  // namespace

std::vector<uint64_t> indices_to_read(uint64_t size, const CheckOptions& options, std::string& skipped) {
  std::vector<uint64_t> indices{0, size - 1};
  if (options.samples == kAllSamples || options.samples >= size) {
    indices.resize(size);
    for (uint64_t i = 0; i < size; ++i) indices[i] = i;
  } else if (options.samples > 0) {
    // i * (size - 1) / (N - 1): overflow-free as a quotient and remainder of (size - 1) / (N - 1).
    const uint64_t n = std::max<uint64_t>(options.samples, 2);
    const uint64_t quotient = (size - 1) / (n - 1), remainder = (size - 1) % (n - 1);
    for (uint64_t i = 1; i + 1 < n; ++i) indices.push_back(i * quotient + i * remainder / (n - 1));
  } else {
    for (uint64_t k = 0; k < kRandomIndices; ++k) indices.push_back(mix_seed(0x5EEDull + k) % size);
  }
  for (uint64_t index : options.indices) {
    if (index < size) indices.push_back(index);
    else skipped += (skipped.empty() ? "" : ", ") + std::to_string(index);
  }
  std::sort(indices.begin(), indices.end());
  indices.erase(std::unique(indices.begin(), indices.end()), indices.end());
  return indices;
}

std::string indices_text(const std::vector<uint64_t>& indices, uint64_t size) {
  if (indices.size() == size) return "all " + std::to_string(size);
  std::string text = std::to_string(indices.size()) + " (indices ";
  for (std::size_t i = 0; i < indices.size() && i < 12; ++i) text += (i ? ", " : "") + std::to_string(indices[i]);
  return text + (indices.size() > 12 ? ", ...)" : ")");
}

}  // namespace tp::detail

namespace tp {

uint64_t parse_sample_count(const std::string& text) {
  if (text.empty()) return 0;
  if (text == "all") return kAllSamples;
  uint64_t count = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), count);
  if (error != std::errc() || end != text.data() + text.size() || count == 0)
    throw ConfigError("--samples", "host plugins check --samples " + text +
                                       ": expected a count of samples to read from each split (1 or more) or all.");
  return count;
}

}  // namespace tp
