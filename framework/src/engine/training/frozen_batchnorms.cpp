#include "engine/training/frozen_batchnorms.h"

#include <algorithm>
#include <string_view>

#include "tp/framework/error.h"
#include "tp/framework/util/name_pattern.h"

namespace tp {

std::vector<std::string> frozen_batchnorm_layers(const std::vector<StateTensor>& state,
                                                 const std::vector<ParamGroupRule>& rules) {
  constexpr std::string_view kStatistic = ".running_mean";
  std::vector<std::string> layers;
  for (const StateTensor& entry : state) {
    const std::string_view name = entry.name;
    if (entry.is_buffer && name.size() > kStatistic.size() && name.ends_with(kStatistic))
      layers.emplace_back(name.substr(0, name.size() - kStatistic.size()));
  }
  std::vector<std::string> frozen;
  for (std::size_t i = 0; i < rules.size(); ++i) {
    if (!rules[i].freeze_bn_stats) continue;
    bool matched = false;
    for (const std::string& layer : layers) {
      const bool hit = std::any_of(state.begin(), state.end(), [&](const StateTensor& entry) {
        return entry.name.size() > layer.size() && entry.name.compare(0, layer.size(), layer) == 0 &&
               entry.name[layer.size()] == '.' && entry.name.find('.', layer.size() + 1) == std::string::npos &&
               name_matches(rules[i].pattern, entry.name);
      });
      if (!hit) continue;
      matched = true;
      if (std::find(frozen.begin(), frozen.end(), layer) == frozen.end()) frozen.push_back(layer);
    }
    if (!matched)
      throw ConfigError("optim.param_groups[" + std::to_string(i) + "].freeze_bn_stats",
                        "config: optim.param_groups[" + std::to_string(i) + "] has freeze_bn_stats = true, but its "
                        "pattern '" + rules[i].pattern + "' matches no BatchNorm layer of the model (a layer with a "
                        "running_mean buffer; `host plugins check` lists the state names). Widen the pattern to the "
                        "layers' names (e.g. \"teacher.*\"), or drop freeze_bn_stats from that group.");
  }
  return frozen;
}

}  // namespace tp
