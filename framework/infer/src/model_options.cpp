#include "model_options.h"

#include "tp/framework/config/overrides.h"
#include "tp/framework/config/secrets.h"
#include "tp/framework/config/value.h"
#include "tp/framework/error.h"
#include "tp/infer/model.h"

namespace tp::infer::detail {

void apply_model_options(toml::table& model_options, const std::vector<std::string>& given) {
  for (const std::string& entry : given) {
    // An entry may hold a secret (a URI with a password): messages show it as --set's do.
    const std::string shown = redact_uri_credentials(entry);
    const auto refuse = [&](const std::string& why) {
      throw Error("tp::infer: OpenOptions::model_options entry \"" + shown + "\" " + why +
                      " Give \"key=value\" with a key of the model's options (\"score_thresh=0.3\"), as "
                      "host predict takes --set model.key=value.",
                  Error::Kind::BadInput);
    };
    if (entry.find('=') == std::string::npos) refuse("has no '='.");
    // The key and the value are trimmed as --set trims them ("score_thresh = 0.3").
    Override split;
    try {
      split = parse_override(entry);
    } catch (const ConfigError&) {
      refuse("has no key before its '='.");
    }
    if (split.key_path.find('.') != std::string::npos)
      refuse("names a nested key; a model's options are one level, without 'model.'.");
    // The component decides which plugin builds the weights' network; another one would not fit them.
    if (split.key_path == "component") refuse("would change the model's component, which the export fixes.");
    set_value_or_string(model_options, split.key_path, split.value_text, "OpenOptions::model_options \"" + shown + "\"");
  }
}

}  // namespace tp::infer::detail
