#include "engine/training/event_dispatcher.h"

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

}  // namespace tp
