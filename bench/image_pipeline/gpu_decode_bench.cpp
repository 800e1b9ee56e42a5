// nvJPEG's decode rate per backend on the GPU the run is on (issue 59: "the report gives the decode
// rate per backend"), through the host's own decoder (framework/src/data/device_decode): a folder
// of JPEGs read into pinned memory once, then decoded in batches, decode only (no resize), with
//   engines_whole    the JPEG engines, every image whole (NVJPEG_BACKEND_HARDWARE, batched)
//   engines_regions  the same, each image only around a RandomResizedCrop box (the image datasets' own
//                    draw, plugins/datasets/common/pixel_io.h), as training reads
//   cuda_decoder     nvJPEG's CUDA decoder, image by image (what a GPU without engines does)
// each by --threads threads with a decoder each (the loader threads' layout), over --rounds rounds of
// every file after one warm-up round. Prints one JSON line per mode: images/s, the counts per
// decoder, the threads, the batch. A GPU without engines gives the engines' modes on the CUDA
// decoder and says so in the counts.
//   gpu_decode_bench DIR [--batch 256] [--threads 1] [--rounds 3] [--modes engines_whole,engines_regions,cuda_decoder]
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <nvjpeg.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "data/device_decode/nvjpeg_decoder.h"
#include "pixel_io.h"  // the image datasets' RandomResizedCrop box (plugins/datasets/common)
#include "rng.h"

namespace {

namespace fs = std::filesystem;
using tp::device_decode::DecodeCounts;
using tp::device_decode::DecoderChoice;
using tp::device_decode::EncodedImage;
using tp::device_decode::NvjpegDecoder;

struct Options {
  fs::path dir;
  int64_t batch = 256;
  int threads = 1;
  int rounds = 3;
  std::vector<std::string> modes{"engines_whole", "engines_regions", "cuda_decoder"};
};

Options parse(int argc, char** argv) {
  if (argc < 2)
    throw std::invalid_argument("usage: gpu_decode_bench DIR [--batch N] [--threads N] [--rounds N] [--modes a,b]");
  Options o;
  o.dir = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--batch") o.batch = std::stoll(value);
    else if (key == "--threads") o.threads = std::stoi(value);
    else if (key == "--rounds") o.rounds = std::stoi(value);
    else if (key == "--modes") {
      o.modes.clear();
      std::stringstream list(value);
      for (std::string mode; std::getline(list, mode, ',');) o.modes.push_back(mode);
    } else {
      throw std::invalid_argument("gpu_decode_bench: unknown option " + key);
    }
  }
  if (o.batch < 1 || o.threads < 1 || o.rounds < 1)
    throw std::invalid_argument("gpu_decode_bench: --batch, --threads and --rounds must be >= 1");
  return o;
}

/// One file: its bytes (in the pinned buffer), the size its header declares and a crop box.
struct File {
  std::size_t offset, size;
  int height, width;
  int x0, y0, x1, y1;
};

/// Every *.jpg / *.jpeg under `dir`, read into one pinned buffer; sizes from nvJPEG's own header read.
std::vector<File> read_files(const fs::path& dir, at::Tensor& pinned) {
  std::vector<fs::path> paths;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    std::string ext = entry.path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (entry.is_regular_file() && (ext == ".jpg" || ext == ".jpeg")) paths.push_back(entry.path());
  }
  std::sort(paths.begin(), paths.end());
  if (paths.empty()) throw std::invalid_argument("gpu_decode_bench: no .jpg file under " + dir.string());
  std::vector<std::string> bytes;
  std::size_t total = 0;
  for (const fs::path& p : paths) {
    std::ifstream in(p, std::ios::binary);
    bytes.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    total += bytes.back().size();
  }
  pinned = at::empty({static_cast<int64_t>(total)}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
  nvjpegHandle_t handle = nullptr;
  if (nvjpegCreateSimple(&handle) != NVJPEG_STATUS_SUCCESS)
    throw std::runtime_error("gpu_decode_bench: nvJPEG did not start");
  std::vector<File> files;
  std::size_t at = 0;
  for (const std::string& b : bytes) {
    std::copy(b.begin(), b.end(), pinned.data_ptr<uint8_t>() + at);
    int components = 0, widths[NVJPEG_MAX_COMPONENT] = {}, heights[NVJPEG_MAX_COMPONENT] = {};
    nvjpegChromaSubsampling_t subsampling{};
    const auto* data = reinterpret_cast<const unsigned char*>(b.data());
    if (nvjpegGetImageInfo(handle, data, b.size(), &components, &subsampling, widths, heights) ==
        NVJPEG_STATUS_SUCCESS) {
      // The box the image datasets' training transform would draw (RandomResizedCrop's defaults).
      tp::datasets::Rng rng(1, files.size());
      const tp::datasets::CropBox box =
          tp::datasets::random_resized_crop_box(heights[0], widths[0], {0.08, 1.0}, {3.0 / 4.0, 4.0 / 3.0}, rng);
      files.push_back({at, b.size(), heights[0], widths[0], box.x, box.y, box.x + box.w, box.y + box.h});
    }
    at += b.size();
  }
  nvjpegDestroy(handle);
  return files;
}

/// The files a round decodes: whole batches only (all of them when there are fewer than a batch),
/// so that no decoder changes its batch size inside the timed rounds (each change re-initialises
/// nvJPEG's batched state).
int64_t files_per_round(const std::vector<File>& files, int64_t batch) {
  const auto n = static_cast<int64_t>(files.size());
  return n < batch ? n : n / batch * batch;
}

/// One thread's share of a round: its batches decoded and waited for.
void decode_share(NvjpegDecoder& decoder, const std::vector<File>& files, const uint8_t* base, int64_t batch,
                  int thread, int threads, bool regions, DecodeCounts& counts) {
  const int64_t n = files_per_round(files, batch);
  for (int64_t begin = thread * batch; begin < n; begin += threads * batch) {
    std::vector<EncodedImage> images;
    for (int64_t i = begin; i < std::min(n, begin + batch); ++i) {
      const File& f = files[static_cast<std::size_t>(i)];
      images.push_back(regions ? EncodedImage{base + f.offset, f.size, f.height, f.width, f.x0, f.y0, f.x1, f.y1}
                               : EncodedImage{base + f.offset, f.size, f.height, f.width, 0, 0, f.width, f.height});
    }
    const auto decoded = decoder.decode(images, counts);
    decoder.stream().synchronize();
  }
}

void run_mode(const Options& o, const std::string& mode, const std::vector<File>& files, const uint8_t* base) {
  if (mode != "engines_whole" && mode != "engines_regions" && mode != "cuda_decoder")
    throw std::invalid_argument("gpu_decode_bench: unknown mode " + mode);
  const DecoderChoice choice =
      mode == "cuda_decoder" ? DecoderChoice::kCudaDecoderOnly : DecoderChoice::kEnginesWhereAvailable;
  const bool regions = mode == "engines_regions";
  std::vector<std::unique_ptr<NvjpegDecoder>> decoders;
  for (int t = 0; t < o.threads; ++t)
    decoders.push_back(std::make_unique<NvjpegDecoder>(c10::Device(c10::kCUDA, 0), choice));
  std::vector<DecodeCounts> counts(static_cast<std::size_t>(o.threads));
  const auto round = [&] {
    std::vector<std::thread> workers;
    for (int t = 0; t < o.threads; ++t)
      workers.emplace_back([&, t] {
        const c10::cuda::CUDAGuard guard(c10::Device(c10::kCUDA, 0));
        decode_share(*decoders[static_cast<std::size_t>(t)], files, base, o.batch, t, o.threads, regions,
                     counts[static_cast<std::size_t>(t)]);
      });
    for (std::thread& w : workers) w.join();
  };
  round();  // warm-up: nvJPEG's buffers, the engines' batched state
  counts.assign(counts.size(), DecodeCounts{});
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < o.rounds; ++r) round();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  DecodeCounts total;
  for (const DecodeCounts& c : counts) {
    total.hardware += c.hardware;
    total.regions += c.regions;
    total.cuda += c.cuda;
    total.failed += c.failed;
  }
  // Decoded images only: a failure costs time but is no throughput.
  const double images = static_cast<double>(total.hardware + total.cuda);
  std::printf("{\"mode\": \"%s\", \"images_per_s\": %.1f, \"images\": %.0f, \"seconds\": %.3f, \"threads\": %d, "
              "\"batch\": %lld, \"engines\": %lld, \"regions\": %lld, \"cuda_decoder\": %lld, \"failed\": %lld, "
              "\"backend\": \"%s\"}\n",
              mode.c_str(), images / seconds, images, seconds, o.threads, static_cast<long long>(o.batch),
              static_cast<long long>(total.hardware), static_cast<long long>(total.regions),
              static_cast<long long>(total.cuda), static_cast<long long>(total.failed), decoders[0]->backend().c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    if (!at::hasCUDA()) throw std::runtime_error("gpu_decode_bench: needs a CUDA device");
    at::Tensor pinned;
    const std::vector<File> files = read_files(o.dir, pinned);
    std::fprintf(stderr, "gpu_decode_bench: %zu JPEGs, %lld bytes\n", files.size(),
                 static_cast<long long>(pinned.numel()));
    for (const std::string& mode : o.modes) run_mode(o, mode, files, pinned.data_ptr<uint8_t>());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
