// Runs the built `host` executable as a user would and captures what it prints.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include "support/test_paths.h"

namespace tp::test {

struct HostRun {
  int exit_code = -1;
  std::string output; ///< stdout and stderr together
};

/// Runs a shell script from the source directory (so configs/ paths work), output captured.
inline HostRun run_shell(const std::string& script) {
  // Built with append(): GCC 12/13 at -O2 report `std::string("cd '") + ...` as an out-of-bounds
  // memcpy (-Warray-bounds, a known false positive of operator+ on a moved temporary).
  std::string command = "cd '";
  command.append(tp::test::source_dir()).append("' && { ").append(script).append(" ; } 2>&1");
  HostRun run;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  std::array<char, 4096> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe) != nullptr) run.output += buffer.data();
  const int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

/// Runs `build/bin/host <args>` from the source directory.
inline HostRun run_host(const std::string& args) {
  std::string command = "'";
  command.append(tp::test::build_dir()).append("/bin/host' ").append(args);
  return run_shell(command);
}

/// Starts `build/bin/host <args>` in the background, waits until the run's `history` file
/// (history.jsonl) has at least `lines` lines (polling every 20 ms, for at most a minute), then
/// sends it SIG`signal_name` ("TERM", "KILL") and waits; the output ends with "exit=<its status>"
/// (143 after a SIGTERM that saved, 137 after SIGKILL).
inline HostRun run_host_until_history(const std::string& args, const std::filesystem::path& history, int lines,
                                      const std::string& signal_name = "TERM") {
  std::string script = "'";
  script.append(tp::test::build_dir())
      .append("/bin/host' ")
      .append(args)
      .append(" & pid=$!; for i in $(seq 1 3000); do [ \"$(wc -l < '")
      .append(history.string())
      .append("' 2>/dev/null || echo 0)\" -ge ")
      .append(std::to_string(lines))
      .append(" ] && break; sleep 0.02; done; kill -")
      .append(signal_name)
      .append(" $pid; wait $pid; echo \"exit=$?\"");
  return run_shell(script);
}

/// Whether `text` contains `part` (a host's output, a file): the tests' most common check.
inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// A fresh, empty directory under the build tree, named after the test.
inline std::filesystem::path fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::path(tp::test::build_dir()) / "test-runs" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The number after `"<key>":` in a one-line JSON object (an eval_*.json, a history line): every
/// digit the host wrote. Throws, naming the key, when the object has no such key.
inline double json_number(const std::string& json, const std::string& key) {
  const auto at = json.find("\"" + key + "\":");
  if (at == std::string::npos) throw std::runtime_error("no \"" + key + "\" in " + json);
  return std::stod(json.substr(at + key.size() + 3));
}

}  // namespace tp::test
