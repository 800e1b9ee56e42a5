#include "tp/framework/config/secrets.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "tp/framework/config/schema.h"

namespace tp {
namespace {

// Where a URI's authority ends (RFC 3986: '/', '?', '#'), or the text around it does.
bool ends_authority(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  return ch == '/' || ch == '?' || ch == '#' || std::isspace(c) != 0 || std::iscntrl(c) != 0;
}

bool holds_secret_word(std::string_view name) {
  for (const std::string_view word : {"TOKEN", "SECRET", "PASSW", "CREDENTIAL", "AUTH"})
    if (name.find(word) != std::string_view::npos) return true;
  return false;
}

}  // namespace

std::string redact_uri_credentials(std::string_view text) {
  std::string out;
  size_t copied = 0; // text before this is in `out`
  size_t search = 0;
  while (true) {
    const size_t scheme_end = text.find("://", search);
    if (scheme_end == std::string_view::npos) break;
    const size_t start = scheme_end + 3;
    size_t end = start;
    while (end < text.size() && !ends_authority(text[end])) ++end;
    const size_t at = text.substr(start, end - start).rfind('@');
    if (at != std::string_view::npos) {
      out.append(text.substr(copied, start - copied));
      out.append(kRedactedUserInfo);
      copied = start + at; // the '@' and the host follow
    }
    search = std::max(end, start);
  }
  out.append(text.substr(copied));
  return out;
}

bool environment_value_recordable(std::string_view name) {
  static constexpr std::array<std::string_view, 8> kExact{
      "OMP_NUM_THREADS",         "MKL_NUM_THREADS",        "CUDA_VISIBLE_DEVICES", "TORCH_SHOW_CPP_STACKTRACES",
      "TORCH_CPP_LOG_LEVEL",     "TORCH_DISTRIBUTED_DEBUG", "TORCH_USE_CUDA_DSA",   "TORCH_CUDA_ARCH_LIST"};
  if (std::find(kExact.begin(), kExact.end(), name) != kExact.end()) return true;
  for (const KeySpec& spec : host_key_schema())
    if (env_mirror_name(spec.path) == name) return true;
  for (const std::string_view family : {"NCCL_", "TORCH_NCCL_", "GLOO_", "MALLOC_"})
    if (name.starts_with(family)) return !holds_secret_word(name);
  return false;
}

}  // namespace tp
