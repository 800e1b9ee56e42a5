// Shared by the webdataset tests: shards written at test time (by the plugin's ShardWriter, or
// member by member with libarchive for names the writer refuses), the plugin's configuration
// with every key at its default, and create/get_sample calls that are expected to fail.
#pragma once

#include <archive.h>
#include <archive_entry.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <opencv2/imgcodecs.hpp>
#include <doctest/doctest.h>

#include "fixtures.h"
#include "shard_writer.h"

namespace tp::test::webdataset {

using tp::test::Dataset;
using tp::test::FakeConfig;
using tp::test::PluginLibrary;
using tp::test::Sample;

inline constexpr const char* kWebDatasetId = "org.torchhost.webdataset";

/// An encoded image of gradient_image(h, w, salt); `ext` ".png" (lossless) or ".jpg".
inline std::vector<unsigned char> encoded_image(int h, int w, int salt, const char* ext = ".png") {
  std::vector<unsigned char> bytes;
  REQUIRE(cv::imencode(ext, tp::test::gradient_image(h, w, salt), bytes));
  return bytes;
}

inline std::string file_text(const std::filesystem::path& path) {
  std::ostringstream text;
  text << std::ifstream(path, std::ios::binary).rdbuf();
  return text.str();
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(text.data(), static_cast<std::streamsize>(text.size()));
}

/// A tar of `members` (name, bytes) in that order, written with libarchive as ustar with any
/// name at all (`../x.jpg`, `/abs.jpg`, a directory when the name ends with '/').
inline void write_raw_tar(const std::filesystem::path& path,
                          const std::vector<std::pair<std::string, std::string>>& members) {
  struct archive* a = archive_write_new();
  REQUIRE(archive_write_set_format_pax_restricted(a) == ARCHIVE_OK);
  REQUIRE(archive_write_set_bytes_in_last_block(a, 1) == ARCHIVE_OK);
  REQUIRE(archive_write_open_filename(a, path.c_str()) == ARCHIVE_OK);
  for (const auto& [name, data] : members) {
    struct archive_entry* entry = archive_entry_new();
    const bool directory = !name.empty() && name.back() == '/';
    archive_entry_copy_pathname(entry, name.c_str());
    archive_entry_set_filetype(entry, directory ? AE_IFDIR : AE_IFREG);
    archive_entry_set_perm(entry, directory ? 0755 : 0644);
    archive_entry_set_size(entry, directory ? 0 : static_cast<la_int64_t>(data.size()));
    REQUIRE(archive_write_header(a, entry) == ARCHIVE_OK);
    if (!directory) REQUIRE(archive_write_data(a, data.data(), data.size()) == static_cast<la_ssize_t>(data.size()));
    archive_entry_free(entry);
  }
  REQUIRE(archive_write_close(a) == ARCHIVE_OK);
  archive_write_free(a);
}

/// Rewrites the size field of the tar header at `offset` of the file at `path` (and its
/// checksum), so the member claims `size` bytes.
inline void patch_member_size(const std::filesystem::path& path, std::size_t offset, uint64_t size) {
  std::string bytes = file_text(path);
  REQUIRE(bytes.size() >= offset + 512);
  char field[13];
  std::snprintf(field, sizeof field, "%011llo", static_cast<unsigned long long>(size));
  bytes.replace(offset + 124, 12, std::string(field, 12));
  unsigned sum = 8 * ' ';
  for (std::size_t i = 0; i < 512; ++i)
    if (i < 148 || i >= 156) sum += static_cast<unsigned char>(bytes[offset + i]);
  char check[8];
  std::snprintf(check, sizeof check, "%06o", sum);
  bytes.replace(offset + 148, 8, std::string(check, 6) + std::string("\0 ", 2));
  write_text(path, bytes);
}

/// The same four images (classes c0 and c1, a PNG and a JPEG each, 24 x 32) written twice: as class
/// folders dir/folder/c<k>/img_<i>.<ext> and as shards dir/shards/v-*.tar with `cls` labels, for
/// comparing webdataset with image_folder on the same files.
struct FolderAndShards {
  std::string pattern;          ///< the shards' brace pattern
  std::vector<int64_t> labels;  ///< each sample's label, in index order (the same in both)
};
inline FolderAndShards write_folder_and_shards(const std::filesystem::path& dir) {
  tp::webdataset::ShardWriter writer((dir / "shards").string(), "v", 1 << 20);
  FolderAndShards out;
  for (int c = 0; c < 2; ++c) {
    std::filesystem::create_directories(dir / "folder" / ("c" + std::to_string(c)));
    for (int k = 0; k < 2; ++k) {
      const char* ext = k == 0 ? ".png" : ".jpg";
      const std::vector<unsigned char> bytes = encoded_image(24, 32, 10 * c + k, ext);
      const std::string name = "img_" + std::to_string(k) + ext;
      write_text(dir / "folder" / ("c" + std::to_string(c)) / name, std::string(bytes.begin(), bytes.end()));
      writer.add("c" + std::to_string(c) + "/img_" + std::to_string(k), {{ext + 1, bytes}, {"cls", std::to_string(c)}});
      out.labels.push_back(c);
    }
  }
  out.pattern = writer.finish().pattern;
  return out;
}

/// Every key at its schema default, `shards` and `cache_dir` set (FakeConfig is neither copyable
/// nor movable).
inline void configure(const PluginLibrary& lib, FakeConfig& cfg, const std::string& shards,
                      const std::filesystem::path& cache_dir) {
  REQUIRE(lib.entry().descriptor_count() == 1);
  tp::test::fill_defaults(*lib.entry().descriptor_at(0), cfg);
  cfg.values["shards"] = shards;
  cfg.values["cache_dir"] = cache_dir.string();
}

/// create(split) that must fail: its status, with the message in lib.host.last_error.
inline tp_status create_status(PluginLibrary& lib, const FakeConfig& cfg, const char* split = "train") {
  const tp_dataset_v1_t& table = lib.dataset_table(kWebDatasetId);
  void* self = nullptr;
  const tp_status status = table.create(&lib.host.host, &cfg.view, split, &self);
  table.destroy(self);
  return status;
}

/// The class label of a sample.
inline int64_t label_value(const Sample& s) { return s.values<int64_t>("label")[0]; }

/// The last log line that starts with "webdataset (<split>)".
inline std::string last_log(const PluginLibrary& lib) {
  for (std::size_t i = lib.host.logs.size(); i-- > 0;)
    if (lib.host.logs[i].rfind("webdataset (", 0) == 0) return lib.host.logs[i];
  return "";
}

}  // namespace tp::test::webdataset
