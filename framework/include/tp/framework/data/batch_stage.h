// Work a loader thread does on each collated batch before the consumer gets it: with
// data.decode = "gpu" the images a dataset handed over encoded (plugin ABI 1.11) are decoded and
// transformed on the device here (docs/datasets.md, "Decoding on the GPU"), on the loader's
// threads and a CUDA stream of their own, so the training thread finds finished device tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tp/framework/data/named_tensors.h"

namespace tp {

class BatchStage {
 public:
  virtual ~BatchStage() = default;

  /// The fields of one row as the source's CPU path makes them (the same sample and seed, asked
  /// with ctx.encoded_images = 0). Throws what the source throws for a bad sample.
  using Refetch = std::function<NamedTensors(std::size_t row)>;
  /// A row neither the stage nor its refetch could make, with the error's message.
  using FailedRow = std::pair<std::size_t, std::string>;

  /// [worker] Makes the consumer's batch from the collated `batch` (`batch` rows, in order), on
  /// loader thread `worker` (< the loader's max(1, num_workers) threads; one call per thread at a
  /// time). Rows it cannot make itself it asks `refetch` for; rows that fail both are appended to
  /// `failed` and left zero, and the loader applies data.on_bad_sample to them (drops them, or
  /// fails naming the sample). Throws tp::Error for what no row policy covers (the device failed).
  virtual NamedTensors run(NamedTensors batch, uint32_t worker, const Refetch& refetch,
                           std::vector<FailedRow>& failed) const = 0;
  /// Whether the loader asks the source for the encoded form (ctx.encoded_images = 1).
  virtual bool wants_encoded() const = 0;
  /// The encoded fields that collate as ragged (concatenated, with "<name>_offsets").
  virtual std::vector<std::string> ragged_fields() const = 0;
  /// One line on what the stage did so far (for the run's log). [any]
  virtual std::string summary() const = 0;
};

}  // namespace tp
