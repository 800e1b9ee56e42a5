#include "input_names.h"

#include <algorithm>

#include "tp/framework/util/bounded_text.h"

namespace tp::infer::detail {

namespace {

// A caller's name, printed: it may come from a client's request.
std::string shown(const std::string& text) { return escape_control_characters(bounded_text(text, 200), false); }

std::string listed(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "'" : ", '") + shown(name) + "'";
  return text;
}

}  // namespace

std::vector<std::string> declared_inputs(const ComponentConfig& model) {
  std::vector<std::string> names;
  if (const auto* one = model.options.get_as<std::string>("input")) {
    names.push_back(one->get());
  } else if (const auto* many = model.options.get_as<toml::array>("inputs")) {
    for (const toml::node& name : *many)
      if (const auto* text = name.as_string()) names.push_back(text->get());
  }
  return names;
}

void check_input_names(const std::vector<Tensor>& inputs, const std::vector<std::string>& declared) {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j)
      if (inputs[j].name == inputs[i].name)
        throw Error("tp::infer: inputs " + std::to_string(j) + " and " + std::to_string(i) + " are both named '" +
                        shown(inputs[i].name) + "'; give one tensor per model input field.",
                    Error::Kind::BadInput);
    if (!declared.empty() && std::find(declared.begin(), declared.end(), inputs[i].name) == declared.end())
      throw Error("tp::infer: input " + std::to_string(i) + " is named '" + shown(inputs[i].name) +
                      "', which the model does not read (its inputs: " + listed(declared) +
                      "); give one tensor per model input field, named as the export's torchhost.model names them.",
                  Error::Kind::BadInput);
  }
}

}  // namespace tp::infer::detail
