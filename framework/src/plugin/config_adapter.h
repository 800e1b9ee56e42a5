// The tp_config_t a component's create() reads: a ConfigView over its validated options whose
// failures are recorded in the calling thread's error slot, like a plugin's own fail().
#pragma once

#include <memory>

#include "tp/framework/config/config_view.h"
#include "tp/framework/config/run_config.h"
#include "tp/framework/plugin/host_services.h"

namespace tp::detail {

inline std::unique_ptr<ConfigView> make_config_view(const ComponentConfig& config) {
  return std::make_unique<ConfigView>(config.options, config.component,
                                      [](tp_status code, const std::string& message) {
                                        HostServices::set_last_error(message);
                                        return code;
                                      });
}

}  // namespace tp::detail
