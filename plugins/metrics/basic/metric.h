// basic_metrics: the C++ side of a metric component, and the components of this library.
// metrics_plugin.cpp turns any Metric factory into a complete tp_metric_v1_t table.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tp/cpp/config.h"
#include "tp/cpp/tensor.h"
#include "tp/entry.h"
#include "tp/iface/metric.h"

namespace tp::metrics {

/// One state tensor: a name (static storage) and the member holding it. The member's address
/// is what visit_state hands out, so the host's in-place all-reduce writes into the metric.
struct StateSlot {
  const char* name;
  at::Tensor* tensor;
};

/// A metric whose state is a set of SUM-reducible float64 / int64 tensors.
class Metric {
 public:
  virtual ~Metric() = default;
  /// The state tensors, in visit order; the pointers live as long as the metric.
  virtual std::vector<StateSlot> state() = 0;
  /// Adds one batch to the state (outputs and targets borrowed for the call). Device work only:
  /// never reads a value back. Throws tp::cpp::Failure naming a missing or misshapen field.
  virtual void update(const tp_named_tensor_t* outputs, uint32_t output_count,
                      const tp_named_tensor_t* targets, uint32_t target_count) = 0;
  /// The metric values from the state (names in static storage). Reads the state back: syncs.
  virtual std::vector<tp_scalar_t> compute() = 0;
};

/// Builds a metric from its validated config, state zeroed on the CPU; throws
/// tp::cpp::Failure(TP_ERR_CONFIG) for values outside their range.
using MetricFactory = std::unique_ptr<Metric> (*)(const tp::cpp::ConfigReader& cfg);

/// Throws tp::cpp::Failure(TP_ERR_INVALID_ARGUMENT, "<component>: <message>") unless `ok`.
void require_input(bool ok, const char* component, const std::string& message);
/// `value` as a double from a 0-dim or one-element state tensor (copies to the CPU: syncs).
double read_scalar(const at::Tensor& value);

std::unique_ptr<Metric> make_accuracy(const tp::cpp::ConfigReader& cfg);
std::unique_ptr<Metric> make_f1(const tp::cpp::ConfigReader& cfg);
std::unique_ptr<Metric> make_iou(const tp::cpp::ConfigReader& cfg);
std::unique_ptr<Metric> make_mae(const tp::cpp::ConfigReader& cfg);
extern const tp_descriptor_t kAccuracyDescriptor;
extern const tp_descriptor_t kF1Descriptor;
extern const tp_descriptor_t kIouDescriptor;
extern const tp_descriptor_t kMaeDescriptor;

}  // namespace tp::metrics
