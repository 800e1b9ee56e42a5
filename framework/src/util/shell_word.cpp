#include "tp/framework/util/shell_word.h"

#include <algorithm>

namespace tp {

std::string shell_word(std::string_view text) {
  const auto plain = [](char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           std::string_view("_./-+:=@%,").find(ch) != std::string_view::npos;
  };
  if (!text.empty() && std::all_of(text.begin(), text.end(), plain)) return std::string(text);
  std::string word = "'";
  for (const char ch : text) word += ch == '\'' ? std::string_view("'\\''") : std::string_view(&ch, 1);
  return word + "'";
}

}  // namespace tp
