// Test support for the inference library's tests (infer_test.cpp, infer_metadata_test.cpp): the C
// callers of infer_c_calls.c, and one tiny image_folder run trained, exported and predicted by
// `host` once per process, which every case opens.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "integration/host_runner.h"
#include "support/class_folders.h"
#include "tp/infer/infer.h"
#include "tp/infer/model.h"

extern "C" {
tp_status infer_c_classify(const char* export_file, const char* plugin_dir, const char* const* paths, uint32_t count,
                           int64_t* out_classes, float* out_probabilities, float* out_logits,
                           uint32_t logits_capacity);
tp_status infer_c_open_fails(const char* path, const char* plugin_dir, int* out_model_is_null);
tp_status infer_c_encoded(const char* export_file, const char* plugin_dir, const uint8_t* bytes, uint64_t size,
                          int64_t* out_class, float* out_probability);
tp_status infer_c_metadata(const char* export_file, const char* plugin_dir, uint32_t index, uint32_t* out_count,
                           char* out_name, size_t name_capacity, char* out_component, size_t component_capacity,
                           int* out_nulls_refused);
tp_status infer_c_tensors(const char* export_file, const char* plugin_dir, const char* name, const float* data,
                          const int64_t* shape, uint32_t ndim, const char* extra, int* out_same,
                          tp_status* out_extra_status, int* out_extra_is_null, char* out_message,
                          size_t message_capacity);
}

namespace tp::test::infer {

namespace fs = std::filesystem;

/// One host predict row: the file's path, logits, class name and probability.
struct HostRow {
  std::string path;
  std::vector<float> logits;
  std::string name;
  float probability = 0.F;
};

/// Exports the last checkpoint of the run in `out` to `exported` with `host export`.
inline void export_last_checkpoint(const fs::path& out, const fs::path& exported) {
  const auto exported_run = tp::test::run_host("export --checkpoint '" + (out / "checkpoints" / "last.pt").string() +
                                               "' --format safetensors --output '" + exported.string() + "'");
  INFO(exported_run.output);
  REQUIRE(exported_run.exit_code == 0);
}

/// A run trained, exported and predicted once for every case: small_cnn on dark/light folders.
struct Exported {
  fs::path dir, exported;
  std::vector<std::string> files; ///< the val files, in host predict --images's row order
  std::vector<HostRow> rows;
  Exported() : dir(tp::test::fresh_dir("infer")), exported(dir / "model.safetensors") {
    tp::test::write_dark_light_folders(dir / "train", 6);
    tp::test::write_dark_light_folders(dir / "val", 3);
    const fs::path cfg = dir / "run.toml", out = dir / "out";
    std::ofstream(cfg) << tp::test::dark_light_run_config("infer", dir / "train", dir / "val", 4, 6);
    const auto train = tp::test::run_host("train --config '" + cfg.string() + "' --output-dir '" + out.string() + "'");
    INFO(train.output);
    REQUIRE(train.exit_code == 0);
    export_last_checkpoint(out, exported);
    const fs::path csv = dir / "images.csv";
    const auto predict = tp::test::run_host("predict --config '" + cfg.string() + "' --output-dir '" + out.string() +
                                            "' --checkpoint last --images '" + (dir / "val").string() +
                                            "' --output '" + csv.string() + "'");
    INFO(predict.output);
    REQUIRE(predict.exit_code == 0);
    std::ifstream in(csv);
    std::string line;
    REQUIRE(std::getline(in, line)); // index,path,logits.0,logits.1,logits.argmax,logits.class,logits.prob
    while (std::getline(in, line)) {
      std::vector<std::string> cells;
      for (std::size_t at = 0, next = 0; next != std::string::npos; at = next + 1)
        cells.push_back(line.substr(at, (next = line.find(',', at)) == std::string::npos ? next : next - at));
      REQUIRE(cells.size() == 7);
      rows.push_back({cells[1], {std::strtof(cells[2].c_str(), nullptr), std::strtof(cells[3].c_str(), nullptr)},
                      cells[5], std::strtof(cells[6].c_str(), nullptr)});
      files.push_back((dir / "val" / cells[1]).string());
    }
    REQUIRE(rows.size() == 6);
  }
};

inline const Exported& exported() {
  static const Exported run;
  return run;
}

/// The options of a model on the CPU with the build's plugins.
inline tp::infer::OpenOptions cpu_options() { return {.device = "cpu", .plugin_dirs = {tp::test::plugin_dir()}}; }

}  // namespace tp::test::infer
