#include "tp/framework/plugin/model_inputs.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <exception>

#include "tensor_handles.h"
#include "tp/framework/error.h"

namespace tp {

NamedTensors example_batch(const std::vector<tp_example_input_t>& examples, int64_t batch_size) {
  at::Generator generator = at::detail::createCPUGenerator(/*seed_val=*/0);
  NamedTensors out;
  for (const auto& ex : examples) {
    std::vector<int64_t> shape{batch_size};
    shape.insert(shape.end(), ex.shape, ex.shape + ex.ndim);
    const auto dtype = detail::from_tp_dtype(ex.dtype);
    const auto options = at::TensorOptions().dtype(dtype);
    out.emplace_back(ex.name, at::isFloatingType(dtype)
                                  ? at::rand(shape, generator, options)
                                  : at::randint(std::max<int64_t>(ex.class_count, 1), shape, generator, options));
  }
  return out;
}

std::optional<ModelRun> run_on_model_inputs(ModelProxy& model, const ComponentInfo& info, int64_t batch_size,
                                            const FallbackInputs& fallback) {
  ModelRun run;
  run.why_not_examples = "it declares no example inputs";
  if (!info.examples.empty()) {
    try {
      run.inputs = example_batch(info.examples, batch_size);
      run.outputs = model.forward(run.inputs);
      run.why_not_examples.clear();
      return run;
    } catch (const std::exception& e) {
      if (!fallback) throw;
      run.why_not_examples = std::string("its example inputs do not fit the run's options: ") + e.what();
    }
  }
  if (!fallback) return std::nullopt;
  try {
    run.inputs = fallback();
    run.outputs = model.forward(run.inputs);
    return run;
  } catch (const std::exception& e) {
    throw Error("the model '" + info.id + "' could not be run: " + run.why_not_examples +
                ", and on the run's first training samples: " + e.what());
  }
}

}  // namespace tp
