// One truth for every command (issue 28 section 5): the list in host/cli_commands.cpp, the README's
// command table, docs/commands.md's synopses, `host --help` and `host <command> --help` agree on
// every command and flag, and the parser refuses a flag a command does not take.
#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "cli_commands.h"
#include "integration/host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

using tp::cli::commands;
using tp::cli::CommandSpec;

std::string source_file(const std::string& relative) {
  return tp::test::read_text(std::filesystem::path(tp::test::source_dir()) / relative);
}

/// The first cells of a Markdown file's table rows that start with "| `host ", unescaped
/// ("\|" -> "|") and without the backticks.
std::vector<std::string> table_commands(const std::string& markdown) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while ((at = markdown.find("\n| `host ", at)) != std::string::npos) {
    const std::size_t start = at + 4;
    const std::size_t end = markdown.find("` |", start);
    REQUIRE(end != std::string::npos);
    std::string cell = markdown.substr(start, end - start);
    for (std::size_t bar; (bar = cell.find("\\|")) != std::string::npos;) cell.erase(bar, 1);
    out.push_back(cell);
    at = end;
  }
  return out;
}

/// The long option names a `--help` text lists ("  -c [ --config ] arg", "  --resume arg").
std::set<std::string> listed_options(const std::string& help) {
  std::set<std::string> out;
  std::size_t at = 0;
  while ((at = help.find("\n  ", at)) != std::string::npos) {
    at += 3;
    std::size_t dashes = help.find("--", at);
    const std::size_t line_end = help.find('\n', at);
    // An option line starts with "-x [ --name ]" or "--name"; a wrapped description starts with spaces.
    if (help[at] != '-' || dashes == std::string::npos || dashes > line_end) continue;
    dashes += 2;
    std::size_t end = dashes;
    while (end < help.size() && (std::isalnum(static_cast<unsigned char>(help[end])) || help[end] == '-')) ++end;
    out.insert(help.substr(dashes, end - dashes));
  }
  return out;
}

}  // namespace

TEST_CASE("the command list is consistent: each synopsis shows exactly the options the command takes") {
  for (const CommandSpec& command : commands()) {
    INFO(command.name);
    std::vector<std::string> taken(command.options.begin(), command.options.end());
    CHECK(tp::cli::synopsis_flags(command.synopsis) == taken);
    CHECK(command.synopsis.find("host " + std::string(command.name == "train" ? "[train]" : command.name)) == 0);
  }
}

TEST_CASE("docs/commands.md's table has every synopsis, word for word, and nothing else") {
  const auto rows = table_commands(source_file("docs/commands.md"));
  std::vector<std::string> expected;
  for (const CommandSpec& command : commands()) expected.emplace_back(command.synopsis);
  CHECK(rows == expected);
}

TEST_CASE("the README's command table lists every command, in the same order, and nothing else") {
  const auto rows = table_commands(source_file("README.md"));
  std::vector<std::string> expected;
  for (const CommandSpec& command : commands()) expected.push_back("host " + std::string(command.name));
  CHECK(rows == expected);
}

TEST_CASE("host --help prints every synopsis and command; host <command> --help lists exactly its options") {
  const auto all = tp::test::run_host("--help");
  REQUIRE(all.exit_code == 0);
  CHECK(all.output.rfind(tp::cli::usage_text(), 0) == 0); // every synopsis, in order
  for (const CommandSpec& command : commands()) {
    INFO(command.name);
    CHECK(all.output.find("  " + std::string(command.name) + " ") != std::string::npos);
    CHECK(all.output.find(std::string(command.summary) + "\n") != std::string::npos);

    const auto own = tp::test::run_host(std::string(command.name) + " --help");
    INFO(own.output);
    REQUIRE(own.exit_code == 0);
    CHECK(own.output.rfind(tp::cli::wrapped_synopsis(command), 0) == 0);
    std::set<std::string> expected(command.options.begin(), command.options.end());
    expected.insert(tp::cli::kGlobalOptions.begin(), tp::cli::kGlobalOptions.end());
    CHECK(listed_options(own.output) == expected);
  }
}

TEST_CASE("the --format help names every format the export and predict synopses list") {
  const auto help = tp::test::run_host("predict --help");
  REQUIRE(help.exit_code == 0);
  // The option's description, wrapped over lines until the next option.
  const std::size_t start = help.output.find("\n  --format ");
  REQUIRE(start != std::string::npos);
  const std::string text = help.output.substr(start, help.output.find("\n  --", start + 1) - start);
  for (const CommandSpec& command : commands()) {
    const std::string synopsis(command.synopsis);
    const std::size_t at = synopsis.find("--format ");
    if (at == std::string::npos) continue;
    std::string formats = synopsis.substr(at + 9, synopsis.find_first_of("] ", at + 9) - at - 9);
    for (std::size_t bar; !formats.empty(); formats = bar == std::string::npos ? "" : formats.substr(bar + 1)) {
      bar = formats.find('|');
      const std::string format = formats.substr(0, bar);
      INFO(command.name, ": ", format, "\n", text);
      CHECK(text.find(format) != std::string::npos);
    }
  }
}

TEST_CASE("eval and predict --help say that --checkpoint defaults to best (docs trial F7)") {
  for (const char* command : {"eval", "predict"}) {
    const auto help = tp::test::run_host(std::string(command) + " --help");
    REQUIRE(help.exit_code == 0);
    const std::size_t start = help.output.find("\n  --checkpoint ");
    REQUIRE(start != std::string::npos);
    const std::string text = help.output.substr(start, help.output.find("\n  --", start + 1) - start);
    INFO(command, text);
    CHECK(text.find("default: best") != std::string::npos);
    CHECK(text.find("checkpoints/best.pt") != std::string::npos);
  }
}

TEST_CASE("a flag the command does not take stops it with exit 2 and its synopsis") {
  const auto run = tp::test::run_host("eval --config configs/quickstart.toml --resume auto");
  CHECK(run.exit_code == 2);
  CHECK(run.output.find("host eval does not take --resume") != std::string::npos);
  CHECK(run.output.find("usage: host eval --config FILE") != std::string::npos);
  const auto plot = tp::test::run_host("plot runs/x --grid optim.lr=1");
  CHECK(plot.exit_code == 2);
  CHECK(plot.output.find("host plot does not take --grid") != std::string::npos);
}

// Security trial F12: `host predict --images ""` (an unset shell variable) predicted the val split
// and exited 0; `--checkpoint ""` read as a checkpoint of 0 tensors; `--output ""` and `--outputs
// ",,"` were silently the defaults. An empty value is refused for every option and command.
TEST_CASE("an option given an empty value is refused with exit 2, naming it, whatever the command") {
  const std::pair<std::string, std::string> cases[] = {
      {"predict --config configs/quickstart.toml --images ''", "--images"},
      {"predict --config configs/quickstart.toml --images configs --checkpoint ''", "--checkpoint"},
      {"predict --config configs/quickstart.toml --output ''", "--output"},
      {"predict --config configs/quickstart.toml --outputs ',,'", "--outputs"},
      {"train --config ''", "--config"},
      {"train --config configs/quickstart.toml --output-dir ''", "--output-dir"},
      {"train --config configs/quickstart.toml --resume ''", "--resume"},
      {"eval --config configs/quickstart.toml --plugin-dir ''", "--plugin-dir"},
      {"export --checkpoint '' --output x.safetensors", "--checkpoint"},
      {"shards write --config configs/quickstart.toml --out ''", "--out"}};
  for (const auto& [args, option] : cases) {
    const auto run = tp::test::run_host(args);
    INFO(args << "\n" << run.output);
    CHECK(run.exit_code == 2);
    CHECK(run.output.find(option + " is empty (an unset shell variable?): give ") != std::string::npos);
  }
  const auto plot = tp::test::run_host("plot ''");
  CHECK(plot.exit_code == 2);
  CHECK(plot.output.find("an argument is empty") != std::string::npos);
}
