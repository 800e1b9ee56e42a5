// The loader's words for samples that failed: the error a source throws for one sample, and the
// list of skipped samples that warnings and refusals append (data_loader.h).
#include "tp/framework/data/data_loader.h"

#include <string>
#include <vector>

namespace tp {

SampleError::SampleError(const std::string& source_name, uint64_t index,
                         const std::string& message, int exit_code)
    : Error(message), source_name_(source_name), index_(index), exit_code_(exit_code) {}

std::string with_skipped_samples(std::string head, const std::vector<SkippedSample>& samples) {
  for (const SkippedSample& s : samples) head += "\n  index " + std::to_string(s.index) + ": " + s.message;
  return head;
}

}  // namespace tp
