// read_safetensors on hostile headers (issue 27, "Untrusted weight files"): every input gives
// tensors or a tp::Error naming what is wrong, never a crash. Before the fix, a header nesting
// brackets deeply overflowed the stack (SIGSEGV, exit 139), a shape whose element count
// overflowed was undefined behaviour, and a zero-element tensor memcpy'd to a null pointer.
#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tp/framework/checkpoint/safetensors.h"
#include "tp/framework/error.h"

#include <doctest/doctest.h>

namespace {

/// A safetensors file: the 8-byte little-endian header length, `header`, then `data`.
std::vector<char> file_of(const std::string& header, const std::string& data = "") {
  std::vector<char> bytes(8);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

/// The message read_safetensors throws for `bytes` ("" when it does not throw a tp::Error).
std::string error_of(const std::vector<char>& bytes) {
  try {
    tp::read_safetensors(bytes);
  } catch (const tp::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("deeply nested metadata is refused, not recursed into") {
  for (int depth : {100, 100000}) {
    CAPTURE(depth);
    const std::string nested = std::string(depth, '[') + std::string(depth, ']');
    const std::string message = error_of(file_of("{\"__metadata__\":" + nested + "}"));
    CHECK(message.find("nested deeper than 64") != std::string::npos);
  }
  // Objects too, and unterminated nesting.
  std::string objects;
  for (int i = 0; i < 1000; ++i) objects += "{\"a\":";
  CHECK(error_of(file_of("{\"__metadata__\":" + objects)).find("nested deeper") != std::string::npos);
}

TEST_CASE("metadata within the depth limit is skipped, whatever its shape") {
  const std::string header = "{\"__metadata__\":{\"format\":\"pt\",\"a\":[1,[2,{\"b\":[]}],{}],\"c\":{},\"d\":null},"
                             "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
  const std::string data("\0\0\x80\x3f\0\0\0\x40", 8); // 1.0f, 2.0f
  const auto tensors = tp::read_safetensors(file_of(header, data));
  REQUIRE(tensors.size() == 1);
  CHECK(tensors[0].first == "w");
  CHECK(at::equal(tensors[0].second, at::tensor({1.0f, 2.0f})));
}

TEST_CASE("shape arithmetic: negative dimensions and overflowing counts are errors") {
  const auto with_shape = [](const std::string& shape, const std::string& offsets) {
    return error_of(file_of("{\"w\":{\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}}",
                            std::string(8, '\0')));
  };
  CHECK(with_shape("[-2,-4]", "[0,32]").find("negative dimension") != std::string::npos);
  CHECK(with_shape("[4294967296,4294967296,4]", "[0,0]").find("overflows") != std::string::npos);
  CHECK(with_shape("[0,4294967296,4294967296]", "[0,0]").find("overflows") != std::string::npos);
  CHECK(with_shape("[1000000]", "[0,8]").find("larger than the file") != std::string::npos);
}

TEST_CASE("a zero-element tensor reads as an empty tensor of its shape") {
  const auto tensors = tp::read_safetensors(file_of("{\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[0,0]}}"));
  REQUIRE(tensors.size() == 1);
  CHECK(tensors[0].second.numel() == 0);
  CHECK(tensors[0].second.sizes() == at::IntArrayRef({0, 3}));
}

TEST_CASE("the tensors' data_offsets must tile the data: no overlap, no gap, nothing after the last") {
  // Security trial F15: every tensor at data_offsets [0, 8] opened and served the same bytes as
  // each weight; Python's safetensors refuses it ("invalid offset").
  const std::string data("\0\0\x80\x3f\0\0\0\x40", 8);  // 1.0f, 2.0f
  const auto two = [&](const std::string& a, const std::string& b, const std::string& bytes) {
    return error_of(file_of("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":" + a +
                                "},\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":" + b + "}}",
                            bytes));
  };
  CHECK(two("[0,8]", "[0,8]", data).find("overlap at byte 0") != std::string::npos);
  CHECK(two("[0,8]", "[16,24]", data + data + data).find("leave a gap at byte 8") != std::string::npos);
  CHECK(two("[0,8]", "[8,16]", data + data + data).find("end at byte 16 of 24") != std::string::npos);
  CHECK(two("[8,16]", "[0,8]", data + data).empty());  // any order, as long as they tile
}
