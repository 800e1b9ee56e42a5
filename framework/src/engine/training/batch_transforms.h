// The run's batch transforms ([[data.batch_transforms]], plugin ABI 1.3): applied in order to
// every training micro-batch after it is placed on the device, never to evaluation batches, each
// call seeded by a pure function of the batch's place in the run.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tp/framework/data/sample_source.h"
#include "tp/framework/data/sampler.h"
#include "tp/framework/plugin/batch_transform_proxy.h"

namespace tp {

/// Domain tag of batch-transform seeds ("bxform" in ASCII), so they never equal a sample seed.
inline constexpr uint64_t kBatchTransformSeedTag = 0x62786F726D00ULL;

/// The seed transform `index` (0-based position in [[data.batch_transforms]]) receives for the
/// training micro-batch `batch` (0-based index within the epoch) of `epoch` on `rank`:
///   h = mix_seed(run_seed ^ kBatchTransformSeedTag); h = mix_seed(h ^ rank);
///   h = mix_seed(h ^ epoch); h = mix_seed(h ^ batch); seed = mix_seed(h ^ index).
/// A pure function of those five values: a resumed run, any num_workers and any machine give the
/// same seed for the same micro-batch; ranks draw independently (like sample seeds); two
/// transforms in one list draw independently. `rank` is cast to uint64_t.
constexpr uint64_t batch_transform_seed(uint64_t run_seed, int64_t rank, uint64_t epoch, uint64_t batch,
                                        uint64_t index) noexcept {
  uint64_t h = mix_seed(run_seed ^ kBatchTransformSeedTag);
  h = mix_seed(h ^ static_cast<uint64_t>(rank));
  h = mix_seed(h ^ epoch);
  h = mix_seed(h ^ batch);
  return mix_seed(h ^ index);
}

/// Where a training micro-batch sits in the run, for its transform seeds.
struct BatchTransformPosition {
  uint64_t run_seed;
  int64_t rank;
  uint64_t epoch;
  uint64_t batch; ///< 0-based index of the micro-batch within its epoch
};

/// [main] `batch` after every transform of `transforms`, in order, each with its
/// batch_transform_seed(). Grad mode is off during the calls (batch fields carry no history).
/// With no transforms, `batch` unchanged at no cost. Throws PluginError.
NamedTensors apply_batch_transforms(const std::vector<std::unique_ptr<BatchTransformProxy>>& transforms,
                                    NamedTensors batch, const BatchTransformPosition& at);

}  // namespace tp
