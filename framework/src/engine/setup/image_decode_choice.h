// data.decode (docs/datasets.md, "Decoding on the GPU"): for one split's loader, whether its
// images are decoded on the device, and why not where they are not. "gpu" that cannot apply is
// refused at start-up naming every reason and its key; "auto" falls back to the CPU and says why.
#pragma once

#include <c10/core/Device.h>

#include <memory>
#include <string>
#include <string_view>

#include "tp/framework/config/run_config.h"
#include "tp/framework/data/batch_stage.h"
#include "tp/framework/data/sample_source.h"

namespace tp {

/// One split's decision.
struct DecodeChoice {
  std::shared_ptr<const BatchStage> stage;  ///< null: the dataset decodes on the loader threads
  std::string state;                        ///< "gpu: <the decoder>, <field> 3xHxW" or "cpu: <why>"
};

/// data.decode for `source` (split `split`) loaded by `workers` threads on `device`. Throws
/// ConfigError (key data.decode) for "gpu" that cannot apply, naming each reason that applies
/// (device, build, dataset, transforms) and ending with `undone`, what the refusal leaves undone
/// for the command ("nothing was trained"; empty: nothing said).
DecodeChoice choose_image_decode(const RunConfig& config, c10::Device device, const SampleSource& source,
                                 const std::string& split, int64_t workers, std::string_view undone);

/// runtime.toml's [decode] table: the mode asked for and each split's state.
std::string decode_table(const RunConfig& config, const DecodeChoice& train, const DecodeChoice* val);

}  // namespace tp
