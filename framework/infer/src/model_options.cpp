#include "model_options.h"

#include "tp/framework/config/value.h"
#include "tp/infer/model.h"

namespace tp::infer::detail {

void apply_model_options(toml::table& model_options, const std::vector<std::string>& given) {
  for (const std::string& entry : given) {
    const std::size_t equals = entry.find('=');
    const std::string key = entry.substr(0, equals);
    const auto refuse = [&](const std::string& why) {
      throw Error("tp::infer: OpenOptions::model_options entry \"" + entry + "\" " + why +
                      " Give \"key=value\" with a key of the model's options (\"score_thresh=0.3\"), as "
                      "host predict takes --set model.key=value.",
                  Error::Kind::BadInput);
    };
    if (equals == std::string::npos) refuse("has no '='.");
    if (key.empty()) refuse("has no key before its '='.");
    if (key.find('.') != std::string::npos) refuse("names a nested key; a model's options are one level, without 'model.'.");
    // The component decides which plugin builds the weights' network; another one would not fit them.
    if (key == "component") refuse("would change the model's component, which the export fixes.");
    set_value_or_string(model_options, key, std::string_view(entry).substr(equals + 1),
                        "OpenOptions::model_options \"" + entry + "\"");
  }
}

}  // namespace tp::infer::detail
