// classify: the inference library from C++ (tp/infer/model.h). Opens a model `host export` wrote
// and prints, for each image, its path, its best class and that class's probability, one line each,
// tab-separated, in the order given:
//   classify [--plugin-dir DIR]... [--batch-size N] EXPORT IMAGE...
// The images are read with the export's own evaluation preprocessing, so the answers are those of
// `host predict --images` on the same files (the same batch size gives the same bits: pass its
// eval.batch_size). Plugin directories default to the installed host's (TORCHHOST_PLUGIN_DIR, set
// by CMakeLists.txt; none inside the torchhost tree); give your build directory too when the
// export names a plugin of yours.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tp/infer/model.h"

namespace {

/// The command line: plugin directories, batch size, the export and the images.
struct Arguments {
  std::vector<std::string> plugin_dirs;
  std::size_t batch_size = 32;
  std::string export_file;
  std::vector<std::string> images;
};

/// Reads the command line; prints the usage and exits with 2 when it is wrong.
Arguments parse(int argc, char** argv) {
  Arguments arguments;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--plugin-dir" && i + 1 < argc) {
      arguments.plugin_dirs.emplace_back(argv[++i]);
    } else if (arg == "--batch-size" && i + 1 < argc) {
      arguments.batch_size = std::strtoul(argv[++i], nullptr, 10);
    } else {
      positional.push_back(arg);
    }
  }
  if (arguments.plugin_dirs.empty() && TORCHHOST_PLUGIN_DIR[0] != '\0')
    arguments.plugin_dirs.emplace_back(TORCHHOST_PLUGIN_DIR);
  if (positional.size() < 2 || arguments.batch_size == 0 || arguments.plugin_dirs.empty()) {
    std::fprintf(stderr, "usage: classify [--plugin-dir DIR]... [--batch-size N] EXPORT IMAGE...\n"
                         "Prints each image's path, best class and its probability, tab-separated.\n"
                         "--plugin-dir: where the export's plugins are (default: '%s'; required if '').\n",
                 TORCHHOST_PLUGIN_DIR);
    std::exit(2);
  }
  arguments.export_file = positional.front();
  arguments.images.assign(positional.begin() + 1, positional.end());
  return arguments;
}

/// The shortest text that reads back to `value` (as `host predict` writes its csv).
std::string shortest(float value) {
  char text[32];
  const std::to_chars_result end = std::to_chars(text, text + sizeof text, value);
  return std::string(text, end.ptr);
}

}  // namespace

int main(int argc, char** argv) {
  const Arguments arguments = parse(argc, argv);
  try {
    tp::infer::OpenOptions options; // device "cpu"; "cuda" with a CUDA build of LibTorch and the plugins
    options.plugin_dirs = arguments.plugin_dirs;
    tp::infer::Model model = tp::infer::Model::open(arguments.export_file, options);
    for (std::size_t at = 0; at < arguments.images.size(); at += arguments.batch_size) {
      const std::size_t end = std::min(at + arguments.batch_size, arguments.images.size());
      const std::vector<std::string> batch(arguments.images.begin() + static_cast<std::ptrdiff_t>(at),
                                           arguments.images.begin() + static_cast<std::ptrdiff_t>(end));
      const tp::infer::Batch answer = model.run_files(batch, /*top_k=*/1);
      if (answer.top.size() != batch.size() || answer.top.front().empty()) {
        std::fprintf(stderr, "classify: %s is no classifier (no logits output); read its outputs with "
                             "Batch::outputs instead.\n", arguments.export_file.c_str());
        return 1;
      }
      for (std::size_t i = 0; i < batch.size(); ++i) {
        const tp::infer::ClassScore& best = answer.top[i].front();
        const std::string name = best.name.empty() ? std::to_string(best.index) : best.name;
        std::printf("%s\t%s\t%s\n", batch[i].c_str(), name.c_str(), shortest(best.probability).c_str());
      }
    }
  } catch (const tp::infer::Error& e) {
    std::fprintf(stderr, "%s\n", e.what()); // one paragraph: what failed and what to do
    return 1;
  }
  return 0;
}
