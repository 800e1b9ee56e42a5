// How `host profile` shows a ModelProfile: a table for people, profile.json for programs (the
// fields are listed in docs/profiling.md).
#pragma once

#include <string>

#include "tp/framework/profile/model_profile.h"

namespace tp {

/// profile.json: one JSON object, numbers as shortest round-trip text, ending in a newline.
std::string profile_json(const ModelProfile& profile);

/// The readable report: model, inputs, sizes, FLOPs/MACs, then one latency row per device and
/// precision (or its error).
std::string profile_table(const ModelProfile& profile);

/// "1.81 G", "56.7 k": `value` with an SI suffix and three significant digits.
std::string si_number(double value);

}  // namespace tp
