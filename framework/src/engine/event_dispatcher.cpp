#include "tp/framework/engine/event_dispatcher.h"

#include <ATen/ATen.h>

#include "tp/framework/dist/dist_context.h"

namespace tp {

uint32_t EventDispatcher::dispatch(int32_t kind, int64_t step, int64_t epoch, double lr, const Scalars& scalars,
                                   const std::string& message) {
  if (callbacks_.empty()) return TP_REQUEST_NONE;
  std::vector<tp_scalar_t> values;
  for (const auto& [name, value] : scalars) values.push_back({name.c_str(), value});
  tp_event_t event{};
  event.struct_size = sizeof(tp_event_t);
  event.kind = kind;
  event.step = static_cast<uint64_t>(step);
  event.epoch = static_cast<uint64_t>(epoch);
  event.lr = lr;
  event.scalars = values.data();
  event.scalar_count = static_cast<uint32_t>(values.size());
  event.message = message.empty() ? nullptr : message.c_str();
  uint32_t requests = TP_REQUEST_NONE;
  for (auto& callback : callbacks_) requests |= callback->on_event(event);
  return requests;
}

uint32_t EventDispatcher::agree(uint32_t requests) {
  if (!dist_) return requests;
  // Sum of per-rank flags > 0 means "some rank asked": stop and save are ORed.
  at::Tensor flags = at::tensor({double((requests & TP_REQUEST_STOP) != 0), double((requests & TP_REQUEST_SAVE) != 0)},
                                at::TensorOptions().dtype(at::kDouble)).to(device_);
  std::vector<at::Tensor> one{flags};
  dist_->all_reduce_sum(one, "agree on callback stop/save requests");
  const at::Tensor host = flags.cpu();
  uint32_t agreed = requests;
  if (host[0].item<double>() > 0) agreed |= TP_REQUEST_STOP;
  if (host[1].item<double>() > 0) agreed |= TP_REQUEST_SAVE;
  return agreed;
}

}  // namespace tp
