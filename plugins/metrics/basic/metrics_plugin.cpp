// basic_metrics: the helpers every metric shares, and tp_entry (the C shell of each component is
// tp/cpp/metric_adapter.h).
#include "metric.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/metric_adapter.h"
#include "tp/cpp/plugin.h"

namespace tp::metrics {

void require_input(bool ok, const char* component, const std::string& message) {
  if (!ok) throw tp::cpp::Failure(TP_ERR_INVALID_ARGUMENT, std::string(component) + ": " + message);
}

double read_scalar(const at::Tensor& value) { return value.item<double>(); }

namespace {

const tp::cpp::Component kComponents[] = {
    tp::cpp::metric_component<Metric, kAccuracyDescriptor, &make_accuracy>(),
    tp::cpp::metric_component<Metric, kF1Descriptor, &make_f1>(),
    tp::cpp::metric_component<Metric, kIouDescriptor, &make_iou>(),
    tp::cpp::metric_component<Metric, kMaeDescriptor, &make_mae>(),
    tp::cpp::metric_component<Metric, kSegmentationDescriptor, &make_segmentation>(),
    multilabel_component(),
};

}  // namespace
}  // namespace tp::metrics

TP_DEFINE_PLUGIN("basic_metrics", TP_TORCH_BUILD_INFO_INIT, tp::metrics::kComponents)
