// start_image_decode in a build without the GPU decoder (a CPU LibTorch, or no nvJPEG or CUDA
// compiler at configure time: TP_GPU_DECODE, docs/datasets.md): there is none, and why.
#include "data/device_decode/image_decode_stage.h"

namespace tp {

std::string gpu_decoder_missing() {
  return "this host was built without the GPU decoder (it needs a CUDA LibTorch, nvJPEG and a CUDA compiler at "
         "configure time; the configure's `torchhost: GPU decode` line says which was missing)";
}

DeviceDecodeStart start_image_decode(const EncodedImageSpec& /*spec*/, c10::Device /*device*/, int64_t /*workers*/,
                                     double /*cpu_share*/) {
  return {nullptr, "", gpu_decoder_missing()};
}

}  // namespace tp
