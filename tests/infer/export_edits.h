// Exports edited for the inference library's tests: a header rewritten (its metadata, or raw
// text spliced in, as a damaged or forged file has it), and what the library writes to stderr.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "integration/host_runner.h"

namespace tp::test::infer {

/// `from` with its safetensors header (the JSON text between the 8-byte little-endian length and
/// the tensors' bytes) replaced by `edit(header)`, padded with spaces so the data stays 8-byte
/// aligned as writers keep it; written to `to`.
inline std::filesystem::path with_header(const std::filesystem::path& from, const std::filesystem::path& to,
                                         const std::function<std::string(const std::string&)>& edit) {
  std::ifstream in(from, std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  std::string text = edit(bytes.substr(8, length));
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((text.size() >> (8 * i)) & 0xFF);
  out += text + bytes.substr(8 + length);
  std::ofstream(to, std::ios::binary) << out;
  return to;
}

/// `from` with its metadata `key` set to the string `text` (for a JSON entry: its dump()).
inline std::filesystem::path with_metadata(const std::filesystem::path& from, const std::string& key,
                                           const std::string& text, const std::filesystem::path& to) {
  return with_header(from, to, [&](const std::string& header) {
    nlohmann::json json = nlohmann::json::parse(header);
    json["__metadata__"][key] = text;
    return json.dump();
  });
}

/// What `body` writes to the process's stderr (fd 2), where the library's log goes; `file` holds
/// it meanwhile.
template <class Body>
std::string stderr_of(const std::filesystem::path& file, Body&& body) {
  std::fflush(stderr);
  const int saved = ::dup(2);
  const int into = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ::dup2(into, 2);
  ::close(into);
  body();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  return tp::test::read_text(file);
}

}  // namespace tp::test::infer
