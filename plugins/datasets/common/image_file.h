// Reading an image file whole with the image datasets' checks, and the checks on image bytes
// (tp_image_file: no OpenCV, no LibTorch): only regular files (a FIFO, a device, a directory are
// refused before any read), an optional cap on the file's size, a truncated JPEG, a header that
// declares more pixels than `max_image_pixels`, whether the bytes begin like an image at all, and
// whether a data file's name escapes its directory. Shared by every image dataset (through pixel_io.h, tp_image_common) and by `host
// shards write`, which copies image files into shards without decoding them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tp::datasets {

/// PIL's decompression-bomb limit (Image.MAX_IMAGE_PIXELS x 2, where PIL raises
/// DecompressionBombError): the default of the datasets' `max_image_pixels` key.
inline constexpr int64_t kDefaultMaxImagePixels = 178'956'970;
/// The same number as the schema's TOML default text.
inline constexpr const char* kDefaultMaxImagePixelsText = "178956970";
/// The largest `max_image_pixels` the datasets accept (a bound for get_int_in).
inline constexpr int64_t kMaxImagePixelsBound = int64_t{1} << 62;

/// The most bytes an image file may hold where a dataset reads one whole (image_folder,
/// segmentation_folder, coco_detection; webdataset's samples and `host shards write` have the same
/// 1 GiB limit, kMaxSampleBytes): checked with fstat before the buffer is allocated, so a sparse
/// 64 GB "image" in a listing costs nothing. Far above any image the pixel limit lets through (an
/// uncompressed BMP at max_image_pixels' default is 537 MB).
inline constexpr uint64_t kMaxImageFileBytes = uint64_t{1} << 30;

/// The schema text of `max_image_pixels`, the same in every dataset that reads images.
inline constexpr const char* kMaxImagePixelsHelp =
    "an image (or mask) whose header declares more pixels than this fails its sample before it is decoded "
    "(data.on_bad_sample): PIL's decompression-bomb limit; 0: no limit of ours (OpenCV still stops at 2^30)";

/// The bytes of the image file at `path`, read whole (decoders need it all in memory). Opened
/// without blocking (a FIFO never waits for a writer) and checked with fstat before any read.
/// Throws tp::cpp::Failure(TP_ERR_IO) naming `component` and `path` when it cannot be read, is not
/// a regular file (a FIFO, a device such as /dev/zero, a directory; also through a symbolic
/// link), is larger than `max_bytes` (> 0; 0: no limit of ours), is a truncated JPEG, or its
/// header declares more than `max_pixels` pixels (width x height; 0: no limit), so that no
/// decoder allocates for it.
std::vector<unsigned char> read_image_file(const std::string& path, const char* component, int64_t max_pixels,
                                           uint64_t max_bytes = 0);

/// The checks read_image_file makes on the bytes it read, for bytes that come from elsewhere (a
/// member of a tar shard): throws tp::cpp::Failure(TP_ERR_IO) naming `component` and `name` when
/// `bytes` are a truncated JPEG or their header declares more than `max_pixels` pixels (0: no
/// limit). Cost: a backwards scan that stops at a JPEG's final marker, and a header parse.
void check_image_bytes(const std::vector<unsigned char>& bytes, const std::string& name, const char* component,
                       int64_t max_pixels);

/// The image format `data` begins with, told by its signature as OpenCV's imdecode tells its
/// decoders ("JPEG", "PNG", "BMP", "WebP", "TIFF", "netpbm", ... every codec an OpenCV build may
/// have), or nullptr for none (an empty file, text, a web page). Reads at most the first 16 bytes.
const char* image_format(const unsigned char* data, std::size_t size);

/// The check of an image file copied without decoding (`host shards write`), which the datasets
/// make only when they decode (decode_bgr: then the sample fails under data.on_bad_sample):
/// throws tp::cpp::Failure(TP_ERR_IO) naming `component` and `name` when `bytes` are empty
/// ("is empty (0 bytes), not an image", decode_bgr's words) or begin with no image format's
/// signature (image_format), showing their first bytes. Not part of read_image_file or
/// check_image_bytes, so what the datasets do with such a file while training is unchanged.
void check_image_format(const std::vector<unsigned char>& bytes, const std::string& name, const char* component);

/// When `bytes` are a macOS AppleDouble file (they begin with its signature 00 05 16 07; or `name`'s
/// file name begins with "._", how macOS names them): the sentence that says so and what to do
/// (remove the ._* files), for the "not an image" messages; else "". macOS writes one beside
/// every file it copies to a volume without its extended attributes, so a dataset copied from a
/// Mac holds a `._cat.jpg` beside each `cat.jpg`, and "not an image" alone sent users looking
/// for a damaged photo.
std::string apple_double_note(const std::vector<unsigned char>& bytes, const std::string& name);

/// Why `data`, a PNG or an uncompressed BMP by its signature, cannot be a whole file, told from
/// its structure without decoding: a PNG whose chunks run past the end or that ends without its
/// IEND chunk ("its IDAT chunk is cut short", "it ends without its IEND chunk"), a BMP shorter
/// than its header's rows need; "" otherwise (also for every other format: the decoder decides).
/// decode_bgr refuses such a file before the decoder sees it: libpng and OpenCV's BMP reader
/// print their own unattributed lines on stderr for it ("libpng error: PNG input buffer is
/// incomplete", "imdecode_(''): can't read data: ..."), and their only switch is global
/// (cv::utils::logging, libpng's default error function). OpenCV refuses every such file anyway,
/// so nothing it would decode is refused. Cost: a walk over the PNG's chunk headers.
std::string truncation_of(const unsigned char* data, std::size_t size);

/// An image's size as its header declares it, read without decoding.
struct DeclaredSize {
  int64_t width = 0;
  int64_t height = 0;
};

/// The size a JPEG (its SOF marker), PNG (IHDR), BMP (its info header), WebP (VP8, VP8L or VP8X),
/// netpbm (P1 to P6, PF, Pf) or TIFF (its first directory) header declares; {0, 0} for any other or
/// a malformed header (the decoder then decides).
DeclaredSize declared_size(const unsigned char* data, std::size_t size);

/// Width and height from a JPEG's SOF marker without decoding; false when `data` is not a JPEG
/// or has no SOF before the end (then the caller decodes to learn the size).
bool jpeg_size(const unsigned char* data, std::size_t size, int* out_h, int* out_w);

/// Throws tp::cpp::Failure(TP_ERR_IO) naming `component`, `path` and the key `max_image_pixels`
/// when width x height is more than `max_pixels` (> 0); for a decoder that reads the size itself
/// (segmentation_folder's masks, through libpng).
void refuse_oversized(int64_t width, int64_t height, int64_t max_pixels, const std::string& path, const char* component);

/// Why the file name `name`, from a data file (a COCO `file_name`, a list's entry), would name a
/// file outside the directory it is taken relative to: "is absolute" or "climbs out of it with
/// '..'"; "" when it stays inside (lexically: a symlink inside is the user's own choice).
std::string escapes_root(const std::string& name);

}  // namespace tp::datasets
