// The inference library's start-up, latency and throughput on the CPU (bench/infer/run.sh runs it
// beside `host predict --images` on the same export and files):
//   infer_bench EXPORT PLUGIN_DIR LIST [ROUNDS]
// LIST names one image file per line. Opens the model once (start-up: Model::open), then ROUNDS
// rounds (default 5), each running every file once at batch 1 and once in batches of 32,
// alternating, so the machine's load falls on both alike. Prints medians over the rounds and the
// process's peak RSS. One line per figure, "name value unit", for run.sh to read.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tp/infer/model.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Seconds per batch for every batch of `size` files of `files` (the last may be shorter).
std::vector<double> run_batches(tp::infer::Model& model, const std::vector<std::string>& files, std::size_t size) {
  std::vector<double> times;
  for (std::size_t at = 0; at < files.size(); at += size) {
    const std::vector<std::string> batch(files.begin() + static_cast<std::ptrdiff_t>(at),
                                         files.begin() + static_cast<std::ptrdiff_t>(std::min(at + size, files.size())));
    const Clock::time_point start = Clock::now();
    model.run_files(batch, 1);
    times.push_back(seconds_since(start));
  }
  return times;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: infer_bench EXPORT PLUGIN_DIR LIST [ROUNDS]\n");
    return 2;
  }
  std::vector<std::string> files;
  std::ifstream list(argv[3]);
  for (std::string line; std::getline(list, line);)
    if (!line.empty()) files.push_back(line);
  const int rounds = argc > 4 ? std::stoi(argv[4]) : 5;
  try {
    const Clock::time_point opening = Clock::now();
    tp::infer::Model model = tp::infer::Model::open(argv[1], {.device = "cpu", .plugin_dirs = {argv[2]}});
    std::printf("startup_open %.3f s\n", seconds_since(opening));
    model.run_files({files.front()}, 1); // the first forward allocates and picks kernels: not a figure
    std::vector<double> latency1, throughput1, latency32, throughput32;
    for (int round = 0; round < rounds; ++round) {
      const std::vector<double> one = run_batches(model, files, 1);
      latency1.push_back(median(one));
      double total = 0;
      for (double t : one) total += t;
      throughput1.push_back(static_cast<double>(files.size()) / total);
      const std::vector<double> many = run_batches(model, files, 32);
      latency32.push_back(median(many));
      total = 0;
      for (double t : many) total += t;
      throughput32.push_back(static_cast<double>(files.size()) / total);
    }
    std::printf("batch1_latency %.2f ms\nbatch1_throughput %.1f images/s\n", 1e3 * median(latency1), median(throughput1));
    std::printf("batch32_latency %.2f ms\nbatch32_throughput %.1f images/s\n", 1e3 * median(latency32),
                median(throughput32));
  } catch (const tp::infer::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("peak_rss %.1f MiB\n", static_cast<double>(usage.ru_maxrss) / 1024.0);
  return 0;
}
