// OpenOptions::model_options: the caller's changes to the export's model options (a detector's
// serving threshold and NMS), applied before the options are validated against the plugin.
#pragma once

#include <toml++/toml.h>

#include <string>
#include <vector>

namespace tp::infer::detail {

/// Sets each entry of `given` ("key=value", as `host predict --set model.key=value` takes it: a
/// TOML value, else the text as a string; key and value trimmed of spaces as --set trims them) in
/// `model_options`, the export's model table without `component`; later entries win. Each value's
/// origin is `OpenOptions::model_options "key=value"` (a URI's user-info shown as "***"),
/// so validate_component names it when the key is unknown or the type wrong. Throws Error
/// (BadInput) for an entry with no '=', an empty key, a dotted key, or the key `component` (the
/// export's model is fixed: open another export for another model).
void apply_model_options(toml::table& model_options, const std::vector<std::string>& given);

}  // namespace tp::infer::detail
