// `host shards write --config FILE [--split train|val|test] --out DIR [--shard-size 256MB]
// [--prefix NAME] [--seed N | --keep-order]`: the images of an image_folder split (class folders
// or a `path,label` CSV, exactly the files and labels the plugin serves, val_split included) as
// WebDataset tar shards that org.torchhost.webdataset and the Python `webdataset` package read
// (docs/datasets.md, "Sharded data"). The image bytes are copied, never decoded again. Only the
// config's [data.*] tables are read ([model] and [loss] may be absent).
//
// The samples are shuffled across the shards (seeded: --seed, default run.seed; --keep-order
// keeps the listing's class-by-class order), as webdataset's own tooling does: a reader that
// shuffles within a few shards at a time (data.group_window) would otherwise see one or two
// classes for long stretches. Sample i of the written order becomes the key of i, zero-padded
// (index order is key order), with three members: the image under its own extension, `cls` (the
// class id as text) and `json` ({"label": id, "class": name, "source": the file's path}). Each
// file is read as the image datasets read it (read_image_file: regular files only, a size cap,
// a truncated JPEG, max_image_pixels) and must begin like an image (check_image_format: not empty,
// a known format's signature). A file that fails them stops the write under data.on_bad_sample =
// "fail" (the default), naming it and the commands that list them all or leave them out; under
// "skip" it is left out and listed, with its reason, in the description and on stdout (data trial
// F2: one bad file per run took 5 runs for 4 files). The set is written all or nothing
// (shard_writer.h), with `<prefix>-shards.json` (the order's seed, the classes, the counts, the
// files left out) moved in last.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "session.h"
#include "tp/framework/config/value_kinds.h"
#include "tp/framework/config/write.h"
#include "tp/framework/util/bounded_text.h"
#include "tp/framework/error.h"

#ifdef TP_HOST_SHARDS
#include <nlohmann/json.hpp>

#include "image_extensions.h"
#include "image_file.h"
#include "shard_writer.h"
#include "split_listing.h"
#include "tp/cpp/config.h"
#include "tp/cpp/guard.h"
#include "tp/framework/config/config_view.h"
#include "tp/framework/data/sampler.h"
#include "tp/framework/engine/stop_signal.h"
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

namespace ds = tp::datasets;
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

// The image member's extension: the file's own, lower-cased ("JPG" -> "jpg").
std::string image_extension(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  if (!ext.empty()) ext.erase(0, 1);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

// The folder a split's files are named relative to in the shards: its own root, else `root`.
std::filesystem::path source_base(const ifo::ListingKeys& keys, const std::string& split) {
  const std::string& held_out = split == "test" ? keys.test_root : split == "val" ? keys.val_root : keys.root;
  return held_out.empty() ? keys.root : held_out;
}

// The image's path relative to the folder its split reads (its class folder and name, or a CSV's
// entry), so the samples do not record where the data happened to be on this machine; the
// description beside the shards records that folder (source.root), for host predict's row names.
std::string source_name(const std::string& path, const ifo::ListingKeys& keys, const std::string& split) {
  const std::filesystem::path base = source_base(keys, split);
  const std::filesystem::path relative = std::filesystem::path(path).lexically_relative(base);
  return relative.empty() || *relative.begin() == ".." ? path : relative.string();
}

// The `image_extensions` line a webdataset table needs to read these shards, when they store an
// image member its default leaves out (an `extensions` entry the user added to the folder's, such
// as ".jpe"); "" when the default reads them all. The whole list, since setting the key replaces
// its default: pasted as printed, it reads every member written.
std::string image_extensions_line(const std::vector<std::string>& written) {
  std::vector<std::string> extra;
  for (const std::string& ext : written)
    if (!ext.empty() && std::find(ds::kImageExtensions.begin(), ds::kImageExtensions.end(), ext) == ds::kImageExtensions.end() &&
        std::find(extra.begin(), extra.end(), ext) == extra.end())
      extra.push_back(ext);
  if (extra.empty()) return "";
  std::sort(extra.begin(), extra.end());
  std::string list, named;
  // Quoted as TOML writes a string, and shown escaped in the comment: an ending is a file name's
  // (security trial F13).
  for (const std::string_view ext : ds::kImageExtensions) list += (list.empty() ? "" : ", ") + toml_basic_string(ext);
  for (const std::string& ext : extra) {
    list += ", " + toml_basic_string(ext);
    named += (named.empty() ? "." : ", .") + escape_control_characters(ext, /*keep_newlines=*/false);
  }
  return "image_extensions = [" + list + "]  # these shards hold " + named +
         " images, which the webdataset default leaves out";
}

// The set's description, beside its shards: `<prefix>-shards.json`.
std::string description_name(const std::string& prefix) { return prefix + "-shards.json"; }

// Names of an earlier write (or a link planted at one) are refused before anything is read; the
// writer's final moves never replace a name either (one placed there during the write).
void refuse_existing_shards(const std::filesystem::path& out, const std::string& prefix) {
  std::error_code error;
  if (!std::filesystem::is_directory(out, error)) return;
  for (const auto& entry : std::filesystem::directory_iterator(out, error)) {
    const std::string name = entry.path().filename().string();
    if ((name.starts_with(prefix + "-") && name.ends_with(".tar")) || name == description_name(prefix)) {
      std::error_code ignored;
      const bool link = entry.is_symlink(ignored);
      throw ConfigError("--out", "host shards write: '" + out.string() + "' already holds " +
                                     (link ? "a symbolic link named like a shard" : "shards named '" + prefix +
                                                                                        "-*.tar'") +
                                     " (" + name + "). Nothing was written: choose another --out or --prefix, or "
                                     "remove the old " + (link ? "link" : "shards") + " first.");
    }
  }
}

// --shard-size in bytes: at least one byte, at most 4 EiB (a double beyond uint64 would wrap).
uint64_t shard_size_bytes(const std::string& text) {
  const double bytes = std::floor(parse_byte_size(text, "--shard-size"));
  if (!(bytes >= 1.0 && bytes <= 4611686018427387904.0))
    throw ConfigError("--shard-size", "host shards write --shard-size " + text + " is not a shard size: give one "
                                      "between 1 byte and 4 EiB, e.g. 256MB (the default) or 1GiB.");
  return static_cast<uint64_t>(bytes);
}

// --out must be a directory or a name one can be created at; checked before anything is read.
void check_out(const std::string& out) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(out, error);
  if (std::filesystem::exists(status) && !std::filesystem::is_directory(status))
    throw ConfigError("--out", "host shards write --out '" + out + "' exists and is not a directory; the shards go "
                               "into a directory (created when missing). Choose another --out.");
}

// A failure of the image_folder listing, in the host's terms: a config problem (exit 2) names the
// table; anything else is a runtime error (exit 1).
[[noreturn]] void listing_failed(const tp::cpp::Failure& e, const std::string& table) {
  const std::string message = "host shards write: " + std::string(e.what());
  if (e.code() == TP_ERR_CONFIG || e.code() == TP_ERR_INVALID_ARGUMENT) throw ConfigError(table, message);
  throw Error(message + ".");
}

// What the failed write left: nothing, and which shards it had completed.
std::string nothing_left(const std::filesystem::path& out, const std::string& prefix, std::size_t completed) {
  if (completed == 0)
    return " Nothing was written to '" + out.string() + "' (no shard had been completed; the partial directory "
           "was removed).";
  char last[32];
  std::snprintf(last, sizeof last, "-%06zu.tar", completed - 1);
  const bool one = completed == 1;
  return " Nothing was written to '" + out.string() + "': " +
         (one ? "the shard this write had completed (" + prefix + "-000000.tar) was"
              : "the " + std::to_string(completed) + " shards this write had completed (" + prefix + "-000000.tar to " +
                    prefix + last + ") were") +
         " removed with its partial directory, so no shard of it is there.";
}

/// A file the image checks refused under data.on_bad_sample = "skip": its source name, and why.
struct LeftOut {
  std::string source;
  std::string reason;
};

// What follows the refusal of a bad file under data.on_bad_sample = "fail": how to list every bad
// file of the split in one pass, and how to write the shards without them.
std::string bad_file_advice(const Session& session, const Options& options) {
  std::string library = "image_folder.so";
  for (const ComponentEntry& entry : session.registry.all())
    if (entry.info->id == kSource) library = entry.library->path();
  return " To list every bad file in one pass: host plugins check '" + library + "' --config '" + options.config +
         "' --samples all (with the same --set options; it reads every sample of each split and names each file "
         "it cannot read). To write the shards without them: data.on_bad_sample = \"skip\" (--set "
         "data.on_bad_sample='\"skip\"'), which leaves them out and lists each, with its reason, on stdout and in "
         "the shards' " + description_name(options.prefix.empty() ? options.split : options.prefix) + ".";
}

// The files left out, as comment lines after the lines to paste (the output stays TOML), and one
// warning: the user sees that the shards hold fewer samples than the split.
void report_left_out(Session& session, const std::vector<LeftOut>& left_out, std::size_t count,
                     const std::filesystem::path& description) {
  if (left_out.empty()) return;
  session.logger.warn("host shards write: " + std::to_string(left_out.size()) + " of " + std::to_string(count) +
                      " files were left out (data.on_bad_sample = \"skip\"): each is listed with its reason on "
                      "stdout and under \"skipped\" in " + description.string());
  std::printf("# %zu bad file%s left out (data.on_bad_sample = \"skip\"):\n", left_out.size(),
              left_out.size() == 1 ? "" : "s");
  for (const LeftOut& one : left_out)
    std::printf("#   %s: %s\n", escape_control_characters(one.source, /*keep_newlines=*/false).c_str(),
                escape_control_characters(one.reason, /*keep_newlines=*/false).c_str());
}

}  // namespace

int run_shards(const Options& options) {
  // First: a stop signal (kStopSignals: SIGINT, SIGTERM, SIGHUP...) stops at the next sample, and
  // the partial directory goes with the writer.
  install_stop_signal_handlers();
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
  const uint64_t shard_bytes = shard_size_bytes(options.shard_size);
  const std::string prefix = options.prefix.empty() ? options.split : options.prefix;
  check_out(options.out);
  refuse_existing_shards(options.out, prefix);

  // The keys as the plugin reads them: its own reader over the C view its create gets, so a key
  // the plugin refuses (val_split outside [0, 1]) is refused here too, and none is mapped twice.
  std::string key_failure;
  const ConfigView view(table.options, table.component, [&](tp_status code, const std::string& message) {
    key_failure = message;
    return code;
  });
  ifo::ListingKeys keys;
  ifo::Listing listing;
  try {
    keys = ifo::read_listing_keys(tp::cpp::ConfigReader(view.view(), "image_folder"));
    listing = ifo::listing_of_split(keys, options.split);
  } catch (const tp::cpp::Failure& e) {
    listing_failed(key_failure.empty() ? e : tp::cpp::Failure(e.code(), key_failure), table.key_path);
  }
  // A shard sample carries one class (.cls), which the webdataset plugin reads as one label.
  if (!listing.label_sets.empty())
    throw ConfigError(table.key_path + ".multi_label",
                      "host shards write: " + table.key_path + " has multi_label = true, and a shard sample carries "
                      "one class (.cls): the labels of each image would be lost. Train from the csv listing itself "
                      "(image_folder), or write the shards with your own tool and a reader for their labels.");
  for (const std::string& loop : listing.loops)
    session->logger.warn("host shards write: '" + loop + "' in " + table.key_path + "'s folders links back to a "
                         "folder it is inside (a link loop): not followed, as the image_folder plugin does not "
                         "follow it, so each image is written once; remove the link if it is a mistake");
  if (!listing.skipped_folders.empty())
    session->logger.info("host shards write: " + table.key_path + ": the hidden folders at the root (" +
                         ifo::skipped_folders_text(listing) + ") are not classes, as for the image_folder plugin");
  // What the listing found worth a word (a class val_split left without val images): the plugin
  // logs them at create, and these shards are that split.
  for (const std::string& warning : listing.warnings)
    session->logger.warn("host shards write: " + table.key_path + ": " + warning);
  if (const ifo::UnlistedNote note = ifo::unlisted_note(listing); !note.text.empty()) {
    const std::string line = "host shards write: " + table.key_path + ": " + note.text;
    if (note.images)
      session->logger.warn(line);
    else
      session->logger.info(line);
  }
  const std::size_t count = listing.paths.size();
  if (count == 0) throw Error("host shards write: " + table.key_path + " (split " + options.split + ") holds no image.");
  const std::size_t width = std::max<std::size_t>(6, std::to_string(count - 1).size());
  // The written order: shuffled with the seed (the epoch-0 permutation of the sampler's own
  // Fisher-Yates, the same on every platform), or the listing's.
  const uint64_t seed = options.seed.empty() ? static_cast<uint64_t>(session->config.run.seed)
                                             : std::stoull(options.seed);
  std::vector<uint64_t> order(count);
  if (options.keep_order)
    for (std::size_t i = 0; i < count; ++i) order[i] = i;
  else
    order = epoch_permutation(count, seed, 0);
  const std::string order_text = options.keep_order ? "in the listing's order (--keep-order)"
                                                    : "shuffled with seed " + std::to_string(seed) +
                                                          (options.seed.empty() ? " (run.seed; --seed N to choose)"
                                                                                : " (--seed)");
  const int64_t max_pixels = table.options["max_image_pixels"].value_or(ds::kDefaultMaxImagePixels);

  std::optional<wds::ShardWriter> writer;
  try {
    writer.emplace(options.out, prefix, shard_bytes);
  } catch (const tp::cpp::Failure& e) {
    throw ConfigError("--out", "host shards write --out: " + std::string(e.what()) + ".");
  }
  for (const std::string& swept : writer->swept())
    session->logger.info("host shards write: removed '" + swept + "', the partial directory of a write that was "
                         "stopped (its process is gone)");
  uint64_t image_bytes = 0;
  std::vector<std::string> member_extensions;  // the image members' extensions written, once each
  std::size_t at = 0, kept = 0;
  const bool skip_bad = session->config.data.on_bad_sample == BadSamplePolicy::kSkip;
  std::vector<LeftOut> left_out;  // under "skip", in written order
  std::string advice;  // set when a bad file stops the write: how to list them all, or skip them
  wds::WrittenShards written;
  try {
    for (; at < count; ++at) {
      if (const int signal_number = pending_stop_signal())
        throw Interrupted(signal_number, "host shards write stopped by signal " + std::to_string(signal_number) +
                                             " at sample " + std::to_string(at) + " of " + std::to_string(count) + ".");
      const std::size_t i = static_cast<std::size_t>(order[at]);
      std::vector<unsigned char> image;
      try {
        // The image datasets' own reader and checks, and no file larger than a shard's sample may be.
        image = ds::read_image_file(listing.paths[i], "host shards write", max_pixels, wds::kMaxSampleBytes);
        // What the datasets find only when they decode (an empty file, text under an image's name),
        // here before it is copied: in the shards it would fail a sample hours into an epoch.
        ds::check_image_format(image, listing.paths[i], "host shards write");
      } catch (const std::exception& e) {
        if (!skip_bad) {
          advice = bad_file_advice(*session, options);
          throw;
        }
        left_out.push_back({source_name(listing.paths[i], keys, options.split), e.what()});
        continue;
      }
      // Keys count the samples written, so they stay dense when files are left out.
      std::string key = std::to_string(kept++);
      key.insert(0, width - std::min(key.size(), width), '0');
      image_bytes += image.size();
      const int64_t label = listing.labels[i];
      const std::string cls = std::to_string(label);
      const std::string json = nlohmann::json{{"label", label},
                                              {"class", listing.classes[static_cast<std::size_t>(label)]},
                                              {"source", source_name(listing.paths[i], keys, options.split)}}
                                   // A file name that is not UTF-8 (Latin-1 from an old archive) stopped the
                                   // write with the JSON library's bare exception (data trial F22): its
                                   // bytes become U+FFFD in this informational member.
                                   .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      const std::string ext = image_extension(listing.paths[i]);
      if (std::find(member_extensions.begin(), member_extensions.end(), ext) == member_extensions.end())
        member_extensions.push_back(ext);
      writer->add(key, {{ext, image}, {"cls", cls}, {"json", json}});
    }
    if (kept == 0)
      throw Error("host shards write: every one of the " + std::to_string(count) + " files of " + table.key_path +
                  " (split " + options.split + ") failed the image checks (data.on_bad_sample = \"skip\" left all "
                  "out; the first: " + left_out.front().source + ": " + left_out.front().reason + ")");
    written = writer->finish(description_name(prefix), [&](const wds::WrittenShards& set) {
      nlohmann::ordered_json description{
          {"pattern", std::filesystem::path(set.pattern).filename().string()},
          {"shards", set.paths.size()},
          {"samples", set.samples},
          {"split", options.split},
          {"source", {{"config", std::filesystem::absolute(options.config).string()},
                      {"table", table.key_path},
                      {"root", std::filesystem::absolute(source_base(keys, options.split)).lexically_normal().string()}}},
          {"classes", listing.classes},
          {"order", options.keep_order ? nlohmann::ordered_json{{"shuffled", false}}
                                       : nlohmann::ordered_json{{"shuffled", true}, {"seed", seed}}},
          {"shard_size", shard_bytes},
          {"on_bad_sample", skip_bad ? "skip" : "fail"},
          {"skipped", nlohmann::ordered_json::array()}};
      for (const LeftOut& one : left_out)
        description["skipped"].push_back({{"source", one.source}, {"reason", one.reason}});
      // A source or reason that is not UTF-8 (a Latin-1 file name) is written with U+FFFD, as the
      // samples' json members are.
      return description.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
    });
  } catch (const Interrupted& e) {
    const std::size_t completed = writer->completed_shards();
    writer.reset();  // the partial directory goes, with every shard in it
    throw Interrupted(e.exit_code() - kExitSignalBase, std::string(e.what()) + nothing_left(options.out, prefix, completed));
  } catch (const std::exception& e) {
    const std::size_t completed = writer->completed_shards();
    writer.reset();
    const std::string where = at < count ? " (at sample " + std::to_string(at) + " of " + std::to_string(count) + ")"
                              : kept == 0 ? "" : " (moving the shards into place)";
    throw Error(std::string(e.what()) + where + "." + nothing_left(options.out, prefix, completed) + advice);
  }
  session->logger.info("host shards write: " + std::to_string(written.samples) + " samples of " + table.key_path +
                       " (split " + options.split + ", " + std::to_string(listing.classes.size()) + " classes, " +
                       std::to_string(image_bytes / (1024 * 1024)) + " MiB of images) in " +
                       std::to_string(written.paths.size()) + " shards, " + order_text +
                       (left_out.empty() ? "" : ", " + std::to_string(left_out.size()) + " bad files left out") +
                       "; described in " + (std::filesystem::path(options.out) / description_name(prefix)).string());
  // A TOML basic string: a --out holding '"' or '\' printed raw gave a line that did not parse, or
  // one that added keys (security trial F13).
  std::printf("shards = %s\n", toml_basic_string(written.pattern).c_str());
  // Without it the reader fails each such sample ("has no image member"): say so here, where the
  // lines to paste are printed, not at the first epoch.
  if (const std::string line = image_extensions_line(member_extensions); !line.empty()) std::printf("%s\n", line.c_str());
  report_left_out(*session, left_out, count, std::filesystem::path(options.out) / description_name(prefix));
  return kExitOk;
}

#endif

}  // namespace tp::cli
