// The one list of `host`'s commands: each one's synopsis, summary and the options it takes. The
// parser refuses an option a command does not take, `host --help` and `host <command> --help` are
// printed from it, and tests/integration/cli_docs_test.cpp holds the README's command table and
// docs/commands.md's synopses to it (issue 28: one truth for every command).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tp::cli {

/// One command of the command line.
struct CommandSpec {
  std::string_view name;     ///< as typed: "train", "tune lr", "plugins check"
  std::string_view synopsis; ///< one line, e.g. "host plot RUN_DIR"; every option it shows is in `options`
  std::string_view summary;  ///< what it does, one sentence
  std::vector<std::string_view> options; ///< the long names it takes besides kGlobalOptions, synopsis order
};

/// Options every command takes: --help, --verbose, --allow-insecure-plugin-dir.
extern const std::vector<std::string_view> kGlobalOptions;

/// Every command, in the order `host --help` lists them.
std::span<const CommandSpec> commands();

/// The command named `name` ("tune lr"), or nullptr.
const CommandSpec* find_command(std::string_view name);

/// One command's synopsis after `lead` ("usage: "), wrapped at `width` columns with continuation
/// lines indented under its first argument.
std::string wrapped_synopsis(const CommandSpec& command, std::string_view lead = "usage: ", std::size_t width = 110);

/// The usage block: every synopsis, wrapped at `width` columns with continuation lines indented
/// under the command's first argument, then the launcher's line.
std::string usage_text(std::size_t width = 110);

/// The `--long-name` flags a synopsis shows, in order, each once: "host plot RUN_DIR" gives none.
std::vector<std::string> synopsis_flags(std::string_view synopsis);

}  // namespace tp::cli
