#include "ragged_outputs.h"

#include <ATen/ATen.h>

#include <string_view>
#include <utility>
#include <vector>

#include "tp/framework/error.h"

#if defined(TP_TORCH_DEVICE_BUILD) && TP_TORCH_DEVICE_BUILD == 2
#include <c10/cuda/CUDAStream.h>
#endif

namespace tp::detail {
namespace {

constexpr std::string_view kOffsetsSuffix = "_offsets";

const at::Tensor* output_named_for_offsets(const NamedTensors& outputs, const std::string& name) {
  for (const auto& [n, t] : outputs)
    if (n == name) return &t;
  return nullptr;
}

/// Whether the calling thread's current stream on `device` is capturing a CUDA graph, where a
/// host read of a device tensor is not allowed (docs/cuda_graphs.md).
bool stream_is_capturing(const c10::Device& device) {
#if defined(TP_TORCH_DEVICE_BUILD) && TP_TORCH_DEVICE_BUILD == 2
  if (!device.is_cuda()) return false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(c10::cuda::getCurrentCUDAStream(device.index()).stream(), &status) == cudaSuccess &&
         status != cudaStreamCaptureStatusNone;
#else
  (void)device;
  return false;
#endif
}

[[noreturn]] void refuse_offsets(const std::string& component_id, const std::string& who, const std::string& name,
                         const std::string& what) {
  throw PluginError(component_id, "forward", who + " returned a ragged output '" + name + "' whose '" + name + std::string(kOffsetsSuffix) +
                    "' " + what + ". Offsets are int64 [B + 1] on the output's device, start at 0, never decrease "
                    "and end at the output's row count (plugin_api/README.md, \"Variable-size fields\"); fix the "
                    "model's forward. Nothing read the output.");
}

}  // namespace

int64_t batch_size_of(const NamedTensors& inputs) {
  for (const auto& [name, tensor] : inputs)
    if (std::string_view(name).ends_with(kOffsetsSuffix) && tensor.dim() == 1 && tensor.numel() >= 1)
      return tensor.numel() - 1;
  for (const auto& [name, tensor] : inputs)
    if (tensor.dim() >= 1 && output_named_for_offsets(inputs, name + std::string(kOffsetsSuffix)) == nullptr)
      return tensor.size(0);
  return -1;
}

void check_ragged_outputs(const NamedTensors& outputs, int64_t batch_size, const std::string& component_id,
                          const std::string& who) {
  // One host read per offsets tensor: FCOS returns one for its three detection outputs.
  std::vector<std::pair<const void*, at::Tensor>> on_host;
  for (const auto& [offsets_name, offsets] : outputs) {
    if (offsets_name.size() <= kOffsetsSuffix.size() || !std::string_view(offsets_name).ends_with(kOffsetsSuffix))
      continue;
    const std::string name = offsets_name.substr(0, offsets_name.size() - kOffsetsSuffix.size());
    const at::Tensor* rows = output_named_for_offsets(outputs, name);
    if (rows == nullptr) continue;
    if (offsets.dim() != 1 || offsets.scalar_type() != at::kLong || offsets.numel() < 1)
      refuse_offsets(component_id, who, name, "is " + std::string(at::toString(offsets.scalar_type())) + " of " +
                            std::to_string(offsets.dim()) + " dimension(s) and " + std::to_string(offsets.numel()) +
                            " entries, not int64 [B + 1]");
    if (batch_size >= 0 && offsets.numel() != batch_size + 1)
      refuse_offsets(component_id, who, name, "has " + std::to_string(offsets.numel()) + " entries for a batch of " +
                            std::to_string(batch_size) + " samples, not " + std::to_string(batch_size + 1));
    if (rows->dim() < 1) refuse_offsets(component_id, who, name, "describes a 0-dimensional output (it has no rows)");
    if (offsets.device() != rows->device())
      refuse_offsets(component_id, who, name, "is on " + offsets.device().str() + " while the output is on " + rows->device().str());
    if (stream_is_capturing(offsets.device())) continue;
    const void* key = offsets.unsafeGetTensorImpl();
    at::Tensor host;
    for (const auto& [k, t] : on_host)
      if (k == key) host = t;
    if (!host.defined()) host = on_host.emplace_back(key, offsets.to(at::kCPU).contiguous()).second;
    const int64_t* o = host.data_ptr<int64_t>();
    const int64_t n = host.numel();
    const int64_t total = rows->size(0);
    if (o[0] != 0) refuse_offsets(component_id, who, name, "starts at " + std::to_string(o[0]) + ", not 0");
    for (int64_t i = 1; i < n; ++i)
      if (o[i] < o[i - 1])
        refuse_offsets(component_id, who, name, "decreases from " + std::to_string(o[i - 1]) + " to " + std::to_string(o[i]) +
                              " at entry " + std::to_string(i));
    if (o[n - 1] != total)
      refuse_offsets(component_id, who, name, "ends at " + std::to_string(o[n - 1]) + " where the output has " + std::to_string(total) +
                            " rows");
  }
}

}  // namespace tp::detail
