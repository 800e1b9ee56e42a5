// Every TOML document the host reads (run configs, --set values, runtime.toml, sweep.toml,
// report.toml, mlflow/state.toml) goes through parse_toml, which bounds how deeply its keys nest
// before toml++ sees it. toml++ caps the nesting of arrays and inline tables but not of dotted
// keys: `a.a.a.<100,000 parts> = 1` built 100,000 nested tables and overflowed the stack (in the
// parser, then in the tables' destructors), a bare SIGSEGV in any command that read the file
// (docs/hardening.md, section 15).
#pragma once

#include <filesystem>
#include <string_view>

#include <toml++/toml.h>

namespace tp {

/// How deeply a document's tables may nest, counting every part of a dotted key, every table
/// header part and every inline table or array around it. Real configs stay under 10.
inline constexpr int kMaxTomlNesting = 128;

/// toml::parse(text, source) after a lexical pass (strings and comments skipped) that throws
/// toml::parse_error at the first key nested deeper than kMaxTomlNesting, naming the line and
/// column like a syntax error, so every caller reports it as it reports one. Cost: one pass over
/// the text, no allocation.
toml::table parse_toml(std::string_view text, std::string_view source = {});

/// parse_toml of `file`'s contents; toml::parse_error (as toml::parse_file) when it cannot be read.
toml::table parse_toml_file(const std::filesystem::path& file);

}  // namespace tp
