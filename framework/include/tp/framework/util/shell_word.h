// Paths inside commands that messages tell a person to run (`host mlflow-sync <run dir>`).
#pragma once

#include <string>
#include <string_view>

namespace tp {

/// `text` as one POSIX shell word: as it is when every byte is a letter, a digit or one of
/// _./-+:=@%, and otherwise in single quotes, each ' written '\''. So a pasted command keeps a
/// path with spaces whole and never runs a `$(...)` it holds. (The crash report, which may not
/// allocate, writes the same form itself: plugin_crash.cpp.)
std::string shell_word(std::string_view text);

}  // namespace tp
