#include "engine/setup/image_decode_choice.h"

#include <toml++/toml.h>

#include <sstream>
#include <utility>
#include <vector>

#include "data/device_decode/image_decode_stage.h"
#include "tp/framework/error.h"

namespace tp {
DecodeChoice choose_image_decode(const RunConfig& config, c10::Device device, const SampleSource& source,
                                 const std::string& split, int64_t workers, std::string_view undone) {
  const DecodeMode mode = config.data.decode;
  if (mode == DecodeMode::kCpu) return {nullptr, "cpu: data.decode = \"cpu\""};
  std::vector<std::string> reasons;
  const EncodedImageSpec* spec = nullptr;
  // Every reason that applies, not the first: a CPU-only host told only "not on CUDA" sends its
  // user to a GPU machine where the build would still refuse.
  if (!device.is_cuda()) reasons.push_back("the run is on " + device.str() + ", not on a CUDA device [run.device]");
  if (const std::string missing = gpu_decoder_missing(); !missing.empty()) reasons.push_back(missing + " [data.decode]");
  if (source.encoded_images().empty())
    reasons.push_back(source.name() + " cannot hand its images over encoded (plugin ABI 1.11: a dataset declares "
                                      "them with encoded_images; image_folder and webdataset do) [data." + split + "]");
  for (const EncodedImageSpec& s : source.encoded_images()) {
    if (s.available) {
      spec = &s;
      break;
    }
    reasons.push_back(source.name() + ", field '" + s.name + "': " + s.reason);
  }
  DeviceDecodeStart start;
  if (reasons.empty() && spec != nullptr) {
    start = start_image_decode(*spec, device, workers, config.data.decode_cpu_share);
    if (!start.stage) reasons.push_back(start.unavailable + " [data.decode]");
  }
  if (!reasons.empty()) {
    std::string why;
    for (const std::string& r : reasons) why += (why.empty() ? "" : "; ") + r;
    if (mode == DecodeMode::kGpu)
      throw ConfigError("data.decode", "data.decode = \"gpu\" cannot decode the " + split + " split's images on the "
                                           "device: " + why + ". Remove what the brackets name, or set data.decode = "
                                           "\"auto\" (the device where it can, else the CPU) or \"cpu\"" +
                                           (undone.empty() ? "" : "; " + std::string(undone)) +
                                           " (docs/datasets.md, \"Decoding on the GPU\").");
    return {nullptr, "cpu: " + why};
  }
  return {start.stage, "gpu: " + start.backend + ", then crop, resize, flip and normalise in one kernel; '" +
                           spec->name + "' 3x" + std::to_string(spec->out_height) + "x" +
                           std::to_string(spec->out_width)};
}

std::string decode_table(const RunConfig& config, const DecodeChoice& train, const DecodeChoice* val) {
  toml::table decode{{"mode", std::string(to_string(config.data.decode))}, {"train", train.state}};
  if (val != nullptr) decode.insert("val", val->state);
  std::ostringstream out;
  out << toml::table{{"decode", std::move(decode)}} << "\n";
  return out.str();
}

}  // namespace tp
