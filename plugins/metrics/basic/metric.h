// basic_metrics: the base class of this library's metric components, and the components.
// tp/cpp/metric_adapter.h turns each Metric factory into a complete tp_metric_v1_t table
// (metrics_plugin.cpp lists them).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tp/cpp/config.h"
#include "tp/cpp/metric_adapter.h"
#include "tp/entry.h"

namespace tp::metrics {

/// The value a metric reports when it has no data to judge (no samples, no pixels of a class).
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
using tp::cpp::StateSlot;

/// A metric whose state is a set of SUM-reducible float64 / int64 tensors; the class
/// tp/cpp/metric_adapter.h drives.
class Metric {
 public:
  virtual ~Metric() = default;
  /// The state tensors, in visit order; the pointers live as long as the metric.
  virtual std::vector<StateSlot> state() = 0;
  /// Adds one batch to the state (outputs and targets borrowed for the call). Device work only:
  /// never reads a value back. Throws tp::cpp::Failure naming a missing or misshapen field.
  virtual void update(const tp::cpp::Fields& outputs, const tp::cpp::Fields& targets) = 0;
  /// The metric values from the state (names in static storage). Reads the state back: syncs.
  virtual std::vector<tp_scalar_t> compute() = 0;
};

/// Throws tp::cpp::Failure(TP_ERR_INVALID_ARGUMENT, "<component>: <message>") unless `ok`.
void require_input(bool ok, const char* component, const std::string& message);
/// `value` as a double from a 0-dim or one-element state tensor (copies to the CPU: syncs).
double read_scalar(const at::Tensor& value);

std::unique_ptr<Metric> make_accuracy(const tp::cpp::ConfigReader& cfg);
std::unique_ptr<Metric> make_f1(const tp::cpp::ConfigReader& cfg);
std::unique_ptr<Metric> make_iou(const tp::cpp::ConfigReader& cfg);
std::unique_ptr<Metric> make_mae(const tp::cpp::ConfigReader& cfg);
std::unique_ptr<Metric> make_segmentation(const tp::cpp::ConfigReader& cfg);
extern const tp_descriptor_t kAccuracyDescriptor;
extern const tp_descriptor_t kF1Descriptor;
extern const tp_descriptor_t kIouDescriptor;
extern const tp_descriptor_t kMaeDescriptor;
extern const tp_descriptor_t kSegmentationDescriptor;
extern const tp_descriptor_t kMultilabelDescriptor;
/// org.torchhost.multilabel's component: its own class (it gathers rows across ranks, ABI 1.7),
/// not a Metric.
tp::cpp::Component multilabel_component();

}  // namespace tp::metrics
