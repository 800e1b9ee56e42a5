#include "tp/framework/monitor/event_file_resume.h"

#include <algorithm>

#include "tp/framework/monitor/tensorboard_events.h"
#include "tp/framework/monitor/tfrecord.h"

namespace tp {

bool is_run_level(const std::string& tag) {
  return tag == kConfigTag || tag.starts_with("_hparams_/") || tag.starts_with(kFinalPrefix);
}

ResumedEventFile resume_event_file(std::string_view file, int64_t step,
                                   const std::set<std::string>* records_at_step) {
  ResumedEventFile out;
  const TfRecords records = split_tfrecords(file);
  out.changed = records.valid_bytes != file.size();  // a record torn by a full disk is dropped
  for (const std::string_view record : records.records) {
    const EventInfo info = inspect_event(record);
    const bool later = info.parsed && !info.file_version && info.step > step;
    const bool run_level = std::any_of(info.tags.begin(), info.tags.end(), is_run_level);
    const bool unkept_record = records_at_step != nullptr && info.parsed && !info.file_version && info.step == step &&
                               !info.tags.empty() && !info.tags.front().starts_with(kPlotsPrefix) &&
                               records_at_step->count(info.tags.front()) == 0;
    if (later || run_level || unkept_record) {
      out.changed = true;
      continue;
    }
    out.bytes += tfrecord_frame(record);
    if (info.tags.empty()) continue;
    out.present.emplace_back(info.step, info.tags.front());
    if (info.tags.front().starts_with(kPlotsPrefix)) out.last_image_step = std::max(out.last_image_step, info.step);
  }
  return out;
}

}  // namespace tp
