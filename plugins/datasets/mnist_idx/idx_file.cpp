#include "idx_file.h"

#include <memory>

#include <zlib.h>

#include "tp/cpp/guard.h"
#include "regular_input.h"

namespace tp::mnist_idx {
namespace {

using tp::cpp::Failure;

void read_exact(gzFile f, void* out, std::size_t n, const std::string& path) {
  auto* p = static_cast<unsigned char*>(out);
  while (n > 0) {
    // gzread takes an unsigned count: read in chunks below 1 GiB.
    const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n, 1u << 30));
    const int got = gzread(f, p, chunk);
    if (got <= 0) {
      int err = 0;
      const char* msg = gzerror(f, &err);
      throw Failure(TP_ERR_IO, "mnist_idx: '" + path + "' is truncated or unreadable (" +
                                   (err != Z_OK && msg != nullptr ? msg : "unexpected end of file") + ")");
    }
    p += got;
    n -= static_cast<std::size_t>(got);
  }
}

}  // namespace

IdxArray read_idx(const std::string& path, uint32_t expected_ndim) {
  datasets::refuse_special_input(path, "mnist_idx", "an idx file");
  std::unique_ptr<gzFile_s, int (*)(gzFile)> f(gzopen(path.c_str(), "rb"), &gzclose);
  if (!f) throw Failure(TP_ERR_IO, "mnist_idx: cannot open '" + path + "'; check `root` and the file names");
  unsigned char magic[4];
  read_exact(f.get(), magic, 4, path);
  if (magic[0] != 0 || magic[1] != 0 || magic[2] != 0x08 || magic[3] != expected_ndim)
    throw Failure(TP_ERR_CONFIG, "mnist_idx: '" + path + "' is not an unsigned-byte IDX file with " +
                                     std::to_string(expected_ndim) + " dimensions (header bytes " +
                                     std::to_string(magic[0]) + " " + std::to_string(magic[1]) + " " +
                                     std::to_string(magic[2]) + " " + std::to_string(magic[3]) + ")");
  IdxArray out;
  uint64_t total = 1;
  for (uint32_t d = 0; d < expected_ndim; ++d) {
    unsigned char b[4];
    read_exact(f.get(), b, 4, path);
    const uint32_t size = (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
    out.dims.push_back(size);
    total *= size;
  }
  if (total > (uint64_t{1} << 34)) throw Failure(TP_ERR_CONFIG, "mnist_idx: '" + path + "' declares an implausible size");
  out.data.resize(total);
  read_exact(f.get(), out.data.data(), out.data.size(), path);
  return out;
}

}  // namespace tp::mnist_idx
