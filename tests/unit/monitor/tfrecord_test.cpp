// TFRecord framing (tp/framework/monitor/tfrecord.h) against bytes TensorBoard's own Python writer
// produced: tensorboard 2.21's tensorboard.compat.tensorflow_stub.pywrap_tensorflow.masked_crc32c
// and tensorboard.summary.writer.record_writer.RecordWriter, run in the project venv:
//   masked_crc32c(b"") == 0xa282ead8, (b"123456789") == 0xc78ab0e5, (b"hello") == 0x191c1fbb,
//   (b"brain.Event:2") == 0x7c0601ee
//   RecordWriter(f).write(b"hello") -> 0500000000000000 eab2043e 68656c6c6f bb1f1c19
//   RecordWriter(f).write(b"")      -> 0000000000000000 29039807 d8ea82a2
#include <string>
#include <string_view>

#include "tp/framework/monitor/tfrecord.h"

#include <doctest/doctest.h>

namespace {

std::string hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

}  // namespace

TEST_CASE("masked CRC-32C equals TensorFlow's (tensorboard's tensorflow_stub)") {
  CHECK(tp::masked_crc32c("") == 0xa282ead8u);
  CHECK(tp::masked_crc32c("123456789") == 0xc78ab0e5u); // unmasked: 0xe3069283, the CRC-32C check value
  CHECK(tp::masked_crc32c("hello") == 0x191c1fbbu);
  CHECK(tp::masked_crc32c("brain.Event:2") == 0x7c0601eeu);
}

TEST_CASE("a framed record is byte for byte what TensorBoard's RecordWriter writes") {
  CHECK(hex(tp::tfrecord_frame("hello")) == "0500000000000000eab2043e68656c6c6fbb1f1c19");
  CHECK(hex(tp::tfrecord_frame("")) == "000000000000000029039807d8ea82a2");
}

TEST_CASE("split_tfrecords returns every record and stops before a torn or damaged one") {
  const std::string a = "first", b = std::string(300, 'x'), c = "third";
  const std::string stream = tp::tfrecord_frame(a) + tp::tfrecord_frame(b) + tp::tfrecord_frame(c);
  const tp::TfRecords all = tp::split_tfrecords(stream);
  REQUIRE(all.records.size() == 3);
  CHECK(all.records[0] == a);
  CHECK(all.records[1] == b);
  CHECK(all.records[2] == c);
  CHECK(all.valid_bytes == stream.size());

  const std::size_t two = tp::tfrecord_frame(a).size() + tp::tfrecord_frame(b).size();
  for (std::size_t cut : {two + 3, two + 12, stream.size() - 1}) { // inside the header, the data, the footer
    CAPTURE(cut);
    const tp::TfRecords torn = tp::split_tfrecords(std::string_view(stream).substr(0, cut));
    CHECK(torn.records.size() == 2);
    CHECK(torn.valid_bytes == two);
  }
  std::string flipped = stream;
  flipped[tp::tfrecord_frame(a).size() + 12 + 100] ^= 0x01; // a bit of b's data
  const tp::TfRecords damaged = tp::split_tfrecords(flipped);
  CHECK(damaged.records.size() == 1);
  CHECK(damaged.valid_bytes == tp::tfrecord_frame(a).size());
  std::string bad_length = stream;
  bad_length[0] = 'Z'; // the first length no longer matches its checksum
  CHECK(tp::split_tfrecords(bad_length).records.empty());
}
