// What a resumed run keeps of an existing TensorBoard event file: the parse side of
// TensorBoardWriter::resume, apart from the writer so that it can be fuzzed on raw bytes
// (tests/fuzz/tensorboard_fuzzer.cpp). An event file in the run directory is input like any
// other: it may be torn by a full disk, or be anything at all.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tp {

/// Tags of the summaries the writer gives fixed names: the config text, the final metrics
/// (final/<name>) and the plot images (plots/<name>).
inline constexpr std::string_view kConfigTag = "config";
inline constexpr std::string_view kFinalPrefix = "final/";
inline constexpr std::string_view kPlotsPrefix = "plots/";

/// A summary that describes the whole run rather than a step (the config, hparams, final
/// metrics): every process writes them again, so a resumed file drops the old ones.
bool is_run_level(const std::string& tag);

/// One event file as resuming at optimizer step `step` leaves it.
struct ResumedEventFile {
  std::string bytes;             ///< the kept records, framed again (tfrecord_frame)
  bool changed = false;          ///< whether `bytes` differ from the file's (a record was dropped)
  /// (step, first tag) of every kept event with tags: a history record already in the file.
  std::vector<std::pair<int64_t, std::string>> present;
  int64_t last_image_step = -1;  ///< the newest step of a kept plots/ image event, or -1
};

/// Splits `file` into TFRecords (split_tfrecords: a torn or corrupt tail is dropped, everything
/// after the first bad record with it) and keeps every record except events after `step` and
/// run-level summaries; records that are not events we can parse are kept as they are. With
/// `records_at_step` non-null (the first tags of the history records the resume keeps at `step`), an
/// event of a history record at `step` itself is kept only when its first tag is one of them: the
/// records an epoch's end wrote after a save at that step, which the resumed run writes again.
/// Never throws on content; cost: one pass and one copy of the file.
ResumedEventFile resume_event_file(std::string_view file, int64_t step,
                                   const std::set<std::string>* records_at_step = nullptr);

}  // namespace tp
