// The one way a pattern in the config matches a state name ([[optim.param_groups]],
// train.init_weights_ignore, train.agc_ignore, freeze_bn_stats' layers): Python's
// fnmatch.fnmatchcase, as timm's and Lightning's name filters are written.
#pragma once

#include <fnmatch.h>

#include <string>

namespace tp {

/// Whether `pattern` matches the whole of `name` as Python's fnmatch.fnmatchcase does: `*` matches
/// any run of characters, dots included ("layer*" takes "layer1.0.conv1.weight"), `?` one, `[...]`
/// a set, and a backslash is an ordinary character (FNM_NOESCAPE).
inline bool name_matches(const std::string& pattern, const std::string& name) {
  return ::fnmatch(pattern.c_str(), name.c_str(), FNM_NOESCAPE) == 0;
}

}  // namespace tp
