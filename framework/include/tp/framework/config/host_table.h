// Checking and completing the host part of a run table: the sections of host keys ([run],
// [train], [optim], ...) and the shape of the component tables. The component tables' own keys are
// left to validate_component() (config/validate.h), once the plugins have declared their schemas.
#pragma once

#include <string>
#include <string_view>

#include <toml++/toml.h>

namespace tp {

/// Checks `root` (file, environment and --set already merged): every key is a host key, a
/// component slot or a section; every host key has its declared type and an allowed choice; every
/// component table is a table with a non-empty string `component`; the required slots ([model],
/// [loss], [data.train]) exist; and the semantic limits hold: each key's limit from the host key
/// table (epochs >= 1, lr > 0, momentum in [0, 1), ...) and the checks across a key's values
/// (two betas in [0, 1); dist.sync_batchnorm = true refused).
/// Throws tp::ConfigError at the first problem, with the key path and a one-paragraph message that
/// names `source_file` (line:column where the node has a position), what was expected and what to
/// do, including a "did you mean" suggestion for unknown keys. With `data_only` ([data.*] is all
/// the command reads: ConfigScope::kData) [model] and [loss] are not required; given, they are
/// checked all the same.
void validate_host_table(const toml::table& root, std::string_view source_file, bool data_only = false);

/// Adds the default of every host key `root` lacks, and rewrites Float keys given as integers to
/// floats, so that `root` becomes the resolved table. Call after validate_host_table().
void complete_host_table(toml::table& root);

/// The valid host path or component slot closest to the unknown dotted `path`: first among the
/// keys of the same table, then among all paths, then a path whose last part equals the last part
/// of `path` ("batch_size" -> "train.batch_size"). "" when nothing is plausible.
std::string suggest_host_path(std::string_view path);

}  // namespace tp
