// An environment variable set (or unset) for one scope, its old value put back at the end: for
// tests of what reads the environment ($XDG_CACHE_HOME, $HOME). Not thread-safe, as setenv is not.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace tp::test {

/// Sets `name` to `value` (nullptr: unsets it) until the end of the scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value != nullptr ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~ScopedEnv() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace tp::test
