#include "answer_outputs.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "tp/framework/engine/pixel_maps.h"

namespace tp::infer::detail {

Tensor host_tensor(const std::string& name, const at::Tensor& tensor) {
  const at::Tensor cpu = tensor.to(at::kCPU).to(at::kFloat).contiguous();
  Tensor out{name, std::vector<int64_t>(cpu.sizes().begin(), cpu.sizes().end()), {}};
  out.values.assign(cpu.data_ptr<float>(), cpu.data_ptr<float>() + cpu.numel());
  return out;
}

std::vector<Tensor> answer_outputs(const std::string& name, const at::Tensor& output, const NamedTensors& inputs,
                                   const BatchLayout* files) {
  const std::vector<at::Tensor> maps =
      files != nullptr ? tp::pixel_maps(output, inputs, *files, output.size(0)) : std::vector<at::Tensor>{};
  if (maps.empty()) return {host_tensor(name, output)};
  int64_t height = 0, width = 0;
  at::Tensor sizes = at::empty({static_cast<int64_t>(maps.size()), 2}, at::kLong);
  for (std::size_t i = 0; i < maps.size(); ++i) {
    const at::Tensor& map = maps[i];
    sizes[static_cast<int64_t>(i)][0] = map.size(-2);
    sizes[static_cast<int64_t>(i)][1] = map.size(-1);
    height = std::max(height, map.size(-2));
    width = std::max(width, map.size(-1));
  }
  std::vector<int64_t> shape = maps.front().sizes().vec();
  shape.insert(shape.begin(), static_cast<int64_t>(maps.size()));
  shape[shape.size() - 2] = height;
  shape[shape.size() - 1] = width;
  at::Tensor stacked = at::zeros(shape, maps.front().options());
  for (std::size_t i = 0; i < maps.size(); ++i) {
    const at::Tensor& map = maps[i];
    stacked[static_cast<int64_t>(i)].narrow(-2, 0, map.size(-2)).narrow(-1, 0, map.size(-1)).copy_(map);
  }
  return {host_tensor(name, stacked), host_tensor(name + "_sizes", sizes)};
}

}  // namespace tp::infer::detail
