// data.decode = "gpu": the BatchStage (tp/framework/data/batch_stage.h) that turns a batch's
// encoded image field (plugin ABI 1.11: the files' bytes and the crop each sample drew) into the
// pixels the model reads, on the device: nvJPEG, then one kernel for crop, resize, flip and
// normalise (resize_kernel.h), on each loader thread's own stream. Rows nvJPEG cannot decode go
// to the dataset's CPU path. docs/datasets.md, "Decoding on the GPU".
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>

#include "tp/framework/data/batch_stage.h"
#include "tp/framework/data/sample_source.h"

namespace tp {

/// A started device decode stage, or why there is none: exactly one of `stage` and `unavailable`
/// is set.
struct DeviceDecodeStart {
  std::shared_ptr<const BatchStage> stage;
  std::string backend;      ///< which decoder it uses ("the GPU's JPEG engines ...")
  std::string unavailable;  ///< one sentence: this build has no GPU decoder, nvJPEG did not start
};

/// Why this build has no GPU decoder, one clause ("this host was built without the GPU decoder
/// (...)"), or "" when it has one: known without a device, so a refusal can give it beside the
/// device's reason.
std::string gpu_decoder_missing();

/// The stage for `spec` (an available encoded image) on `device` for a loader of `workers`
/// threads (0: the consumer's thread); each batch's last `cpu_share` (data.decode_cpu_share, in
/// [0, 1)) of rows decoded on the dataset's CPU path by the loader thread while the device decodes
/// the rest. Starts nvJPEG once to see that it runs there.
DeviceDecodeStart start_image_decode(const EncodedImageSpec& spec, c10::Device device, int64_t workers,
                                     double cpu_share);

}  // namespace tp
