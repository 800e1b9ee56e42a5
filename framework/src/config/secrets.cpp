#include "tp/framework/config/secrets.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "tp/framework/config/schema.h"

namespace tp {
namespace {

// Where the text around a URI ends it: whitespace or a control character.
bool ends_token(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  return std::isspace(c) != 0 || std::iscntrl(c) != 0;
}

// Where a URI's authority ends (RFC 3986: '/', '?', '#'), or the text around it does.
bool ends_authority(char ch) { return ch == '/' || ch == '?' || ch == '#' || ends_token(ch); }

// A character RFC 3986 allows in a host name (unreserved, sub-delims, '%'), or a byte of UTF-8.
bool host_character(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  return std::isalnum(c) != 0 || c >= 0x80 || std::string_view("-._~%!$&'()*+,;=").find(ch) != std::string_view::npos;
}

// Whether `authority` (what follows the user-info) reads as host[:port]: "h", "h:5000", "[::1]:80", "".
bool host_and_port(std::string_view authority) {
  std::string_view port;
  if (authority.starts_with('[')) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return false;
    port = authority.substr(close + 1);
  } else {
    const size_t colon = authority.find(':');
    if (!std::all_of(authority.begin(), authority.begin() + static_cast<std::ptrdiff_t>(std::min(colon, authority.size())),
                     host_character))
      return false;
    port = colon == std::string_view::npos ? std::string_view() : authority.substr(colon);
  }
  if (port.empty()) return true;
  return port[0] == ':' && std::all_of(port.begin() + 1, port.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; });
}

// The '@' that ends the user-info of the URI whose authority starts at text[start], or npos. The
// RFC 3986 reading (the last '@' before the first '/', '?' or '#') where what follows it is a
// host[:port]; where it is not, a '#', '?' or '/' in the password cut the authority short
// ("http://alice:pa#ss@h" would have the host "alice" and the port "pa"), and the only reading
// left is that everything up to the last '@' before the end of the token is user-info.
size_t user_info_end(std::string_view text, size_t start) {
  size_t token_end = start;
  while (token_end < text.size() && !ends_token(text[token_end])) ++token_end;
  size_t end = start;
  while (end < token_end && !ends_authority(text[end])) ++end;
  const size_t at = text.substr(start, end - start).rfind('@');
  const size_t host = at == std::string_view::npos ? start : start + at + 1;
  if (host_and_port(text.substr(host, end - host))) return at == std::string_view::npos ? at : start + at;
  const size_t last = text.substr(start, token_end - start).rfind('@');
  return last == std::string_view::npos ? last : start + last;
}

// `text` with the bytes that could drive a terminal shown as \xNN: a refused URI is echoed.
std::string printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (const char ch : text) {
    const auto byte = static_cast<unsigned char>(ch);
    if (byte >= 0x20 && byte != 0x7f) {
      out += ch;
    } else {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    }
  }
  return out;
}

// `uri` with everything before its last '@' (after "://" where it has one) as kRedactedUserInfo:
// the widest reading, for the message that refuses a URI whose user-info reads more than one way.
std::string redact_widest(std::string_view uri) {
  const size_t scheme_end = uri.find("://");
  const size_t start = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  const size_t at = uri.rfind('@');
  if (at == std::string_view::npos || at < start) return printable(uri);
  return printable(std::string(uri.substr(0, start)) + std::string(kRedactedUserInfo) + std::string(uri.substr(at)));
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
    const size_t at = user_info_end(text, start);
    if (at != std::string_view::npos) {
      out.append(text.substr(copied, start - copied));
      out.append(kRedactedUserInfo);
      copied = at; // the '@' and the host follow
    }
    search = at == std::string_view::npos ? start : at;
  }
  out.append(text.substr(copied));
  return out;
}

std::optional<std::string_view> uri_user_info(std::string_view uri) {
  const size_t scheme_end = uri.find("://");
  if (scheme_end == std::string_view::npos) return std::nullopt;
  const size_t start = scheme_end + 3;
  const size_t at = user_info_end(uri, start);
  if (at == std::string_view::npos) return std::nullopt;
  return uri.substr(start, at - start);
}

std::string unreadable_user_info(std::string_view where, std::string_view uri) {
  if (uri.find('@') == std::string_view::npos) return "";
  const std::string shown = std::string(where) + " = \"" + redact_widest(uri) + "\"";
  const std::string advice =
      " Percent-encode these characters in the name and the password: '#' as %23, '?' as %3F, '/' as %2F, '@' as "
      "%40, a space as %20 (\"http://alice:pa%23ss@host:5000\"), or give the server without user-info and set "
      "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD. Nothing was written.";
  const size_t scheme_end = uri.find("://");
  if (scheme_end == std::string_view::npos)
    return shown + ": a URI with user-info (the name and password before the '@') needs http:// or https:// in "
                   "front (\"http://alice:pw@host:5000\"); without it the password is no part of a URI and "
                   "would be written in clear." + advice;
  const size_t start = scheme_end + 3;
  if (std::any_of(uri.begin(), uri.end(), ends_token))
    return shown + ": the URI holds a space or a control character, so where its user-info (the name and "
                   "password before the '@') ends cannot be told." + advice;
  const size_t end = std::min(uri.find_first_of("/?#", start), uri.size());
  const size_t first_at = uri.find('@', start);
  if (uri.find('@', end) != std::string_view::npos || first_at != uri.rfind('@'))
    return shown + ": its user-info (the name and password before the '@') holds a '#', '?', '/' or '@' that "
                   "is not percent-encoded, so it reads more than one way: a client would take part of the "
                   "password for the host, the path or a fragment, and send or write it in clear." + advice;
  return "";
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
