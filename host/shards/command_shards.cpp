// `host shards write --config FILE [--split train|val|test] --out DIR [--shard-size 256MB]
// [--prefix NAME]`: the images of an image_folder split (class folders or a `path,label` CSV,
// exactly the files and labels the plugin serves, val_split included) as WebDataset tar shards
// that org.torchhost.webdataset and the Python `webdataset` package read (docs/datasets.md,
// "Sharded data"). The image bytes are copied, never decoded again.
//
// Sample i of the split becomes the key of i, zero-padded (so index order is key order), with
// three members: the image under its own extension, `cls` (the class id as text) and `json`
// ({"label": id, "class": name, "source": the file's path}).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "commands.h"
#include "session.h"
#include "tp/framework/config/value_kinds.h"
#include "tp/framework/error.h"

#ifdef TP_HOST_SHARDS
#include <nlohmann/json.hpp>

#include "shard_writer.h"
#include "split_listing.h"
#endif

namespace tp::cli {

#ifndef TP_HOST_SHARDS

int run_shards(const Options&) {
  throw ConfigError("", "host shards write: this host was built without the webdataset plugin and its shard writer "
                        "(CMake option TP_WEBDATASET=OFF, e.g. the GPU kit, whose bundle has no libarchive). Write "
                        "the shards with a host built with TP_WEBDATASET=ON (the default) and copy them over.");
}

#else

namespace {

namespace ifo = tp::image_folder;
namespace wds = tp::webdataset;

constexpr const char* kSource = "org.torchhost.image_folder";

// The component table `split` reads: [data.<split>], or [data.train] where the config builds the
// split from it (data.val_from_train, data.test_from_train), as a run would.
const ComponentConfig& split_table(const RunConfig& config, const std::string& split) {
  if (split == "val" && config.data.val) return *config.data.val;
  if (split == "test" && config.data.test) return *config.data.test;
  if ((split == "val" && !config.data.val_from_train) || (split == "test" && !config.data.test_from_train))
    throw ConfigError("data." + split, "host shards write --split " + split + ": the config has no [data." + split +
                                           "] and data." + split + "_from_train = false, so it has no " + split +
                                           " split to write.");
  return config.data.train;
}

std::string string_key(const ComponentConfig& table, const char* key) {
  return table.options[key].value_or(std::string());
}

// The keys of an image_folder table that choose its files, as the plugin reads them (the
// session filled in the defaults and resolved the paths).
ifo::ListingKeys listing_keys(const ComponentConfig& table) {
  ifo::ListingKeys keys;
  keys.root = string_key(table, "root");
  keys.csv = string_key(table, "csv");
  keys.val_root = string_key(table, "val_root");
  keys.val_csv = string_key(table, "val_csv");
  keys.test_root = string_key(table, "test_root");
  keys.test_csv = string_key(table, "test_csv");
  keys.val_split = table.options["val_split"].value_or(0.0);
  keys.split_seed = static_cast<uint64_t>(table.options["split_seed"].value_or(int64_t{0}));
  if (const toml::array* extensions = table.options["extensions"].as_array())
    for (const auto& e : *extensions) keys.extensions.push_back(e.value_or(std::string()));
  return keys;
}

std::vector<unsigned char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof())
    throw Error("host shards write: cannot read '" + path + "'; check that it exists and is readable.");
  return bytes;
}

// The image member's extension: the file's own, lower-cased ("JPG" -> "jpg").
std::string image_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  if (!ext.empty()) ext.erase(0, 1);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

// The image's path relative to the folder its split reads (its class folder and name, or a CSV's
// entry), so the shards do not record where the data happened to be on this machine.
std::string source_name(const std::string& path, const ifo::ListingKeys& keys, const std::string& split) {
  const std::string& held_out = split == "test" ? keys.test_root : split == "val" ? keys.val_root : keys.root;
  const std::filesystem::path base = held_out.empty() ? keys.root : held_out;
  const std::filesystem::path relative = std::filesystem::path(path).lexically_relative(base);
  return relative.empty() || *relative.begin() == ".." ? path : relative.string();
}

// A shard of an earlier write under the same name would be replaced without a word.
void refuse_existing_shards(const std::filesystem::path& out, const std::string& prefix) {
  std::error_code error;
  if (!std::filesystem::is_directory(out, error)) return;
  for (const auto& entry : std::filesystem::directory_iterator(out, error)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(prefix + "-") && name.ends_with(".tar"))
      throw ConfigError("--out", "host shards write: '" + out.string() + "' already holds shards named '" + prefix +
                                     "-*.tar' (" + name + "). Nothing was written: choose another --out or --prefix, "
                                     "or remove the old shards first.");
  }
}

}  // namespace

int run_shards(const Options& options) {
  const std::unique_ptr<Session> session = open_session(options);
  // One writer: ranks of a launcher or torchrun would each write the same shards into one place.
  if (session->place.world_size > 1)
    throw ConfigError("", "host shards write runs as one process, but this is rank " +
                              std::to_string(session->place.rank) + " of " +
                              std::to_string(session->place.world_size) + " (" + session->place.source +
                              "): run it without --nproc-per-node, torchrun or srun; the shards are written once "
                              "and every node then reads them.");
  const ComponentConfig& table = split_table(session->config, options.split);
  if (table.component != kSource)
    throw ConfigError(table.key_path + ".component",
                      "host shards write reads " + std::string(kSource) + " splits (class folders or a `path,label` "
                      "CSV), but " + table.key_path + " is '" + table.component + "'. Point --config at a run whose "
                      "split is an image_folder table.");
  const double shard_bytes = parse_byte_size(options.shard_size, "--shard-size");
  const std::string prefix = options.prefix.empty() ? options.split : options.prefix;
  refuse_existing_shards(options.out, prefix);

  const ifo::ListingKeys keys = listing_keys(table);
  const ifo::Listing listing = ifo::listing_of_split(keys, options.split);
  const std::size_t count = listing.paths.size();
  if (count == 0) throw Error("host shards write: " + table.key_path + " (split " + options.split + ") holds no image.");
  const std::size_t width = std::max<std::size_t>(6, std::to_string(count - 1).size());
  wds::ShardWriter writer(options.out, prefix, static_cast<uint64_t>(shard_bytes));
  uint64_t image_bytes = 0;
  for (std::size_t i = 0; i < count; ++i) {
    std::string key = std::to_string(i);
    key.insert(0, width - std::min(key.size(), width), '0');
    const std::vector<unsigned char> image = file_bytes(listing.paths[i]);
    image_bytes += image.size();
    const int64_t label = listing.labels[i];
    const std::string cls = std::to_string(label);
    const std::string json = nlohmann::json{{"label", label},
                                            {"class", listing.classes[static_cast<std::size_t>(label)]},
                                            {"source", source_name(listing.paths[i], keys, options.split)}}
                                 .dump();
    writer.add(key, {{image_extension(listing.paths[i]), image}, {"cls", cls}, {"json", json}});
  }
  const wds::WrittenShards written = writer.finish();
  session->logger.info("host shards write: " + std::to_string(written.samples) + " samples of " + table.key_path +
                       " (split " + options.split + ", " + std::to_string(listing.classes.size()) + " classes, " +
                       std::to_string(image_bytes / (1024 * 1024)) + " MiB of images) in " +
                       std::to_string(written.paths.size()) + " shards");
  std::printf("shards = \"%s\"\n", written.pattern.c_str());
  return kExitOk;
}

#endif

}  // namespace tp::cli
