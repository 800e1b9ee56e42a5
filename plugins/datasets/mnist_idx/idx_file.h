// IDX files (LeCun's MNIST format): a big-endian header (two zero bytes, a type code, the number
// of dimensions, then one uint32 size per dimension) followed by the data. Only unsigned-byte
// data (type 0x08), which is what MNIST, Fashion-MNIST and KMNIST ship.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tp::mnist_idx {

/// One IDX file read whole.
struct IdxArray {
  std::vector<uint32_t> dims;  ///< dims[0] is the item count
  std::vector<uint8_t> data;   ///< product(dims) bytes, row-major
};

/// Reads `path`, plain or gzip-compressed (zlib's gzread reads both, so `.gz` needs no flag).
/// Throws tp::cpp::Failure naming the file: TP_ERR_IO when it cannot be opened or is truncated,
/// TP_ERR_CONFIG when the header is not an unsigned-byte IDX header of `expected_ndim` dims.
IdxArray read_idx(const std::string& path, uint32_t expected_ndim);

}  // namespace tp::mnist_idx
