#include "tp/framework/monitor/tensorboard_events.h"

#include "src/monitor/proto/tensorboard_event.pb.h" // generated at build time (framework/CMakeLists.txt)
#include "tp/framework/error.h"

namespace tp {
namespace pb = tp::tensorboard;

namespace {

pb::Event make_event(double wall_time, int64_t step) {
  pb::Event event;
  event.set_wall_time(wall_time);
  event.set_step(step);
  return event;
}

// A zero-length float vector: the payload TensorBoard's own hparams writer uses when only the
// metadata matters (metadata.py NULL_TENSOR; 6 bytes).
void set_null_tensor(pb::TensorProto& tensor) {
  tensor.set_dtype(pb::DT_FLOAT);
  tensor.mutable_tensor_shape()->add_dim()->set_size(0);
}

std::string hparams_event(double wall_time, int64_t step, std::string_view tag, const pb::HParamsPluginData& data) {
  pb::Event event = make_event(wall_time, step);
  pb::Summary::Value& value = *event.mutable_summary()->add_value();
  value.set_tag(std::string(tag));
  pb::SummaryMetadata::PluginData& plugin = *value.mutable_metadata()->mutable_plugin_data();
  plugin.set_plugin_name("hparams");
  plugin.set_content(data.SerializeAsString());
  set_null_tensor(*value.mutable_tensor());
  return event.SerializeAsString();
}

uint32_t big_endian_u32(std::string_view bytes, std::size_t at) {
  uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

// PNG colour type (IHDR byte 25) -> Summary.Image colorspace: grey, grey + alpha, RGB, RGBA.
// Palette images decode to RGB.
int colorspace_of(int color_type) {
  switch (color_type) {
    case 0: return 1;
    case 4: return 2;
    case 6: return 4;
    default: return 3;
  }
}

}  // namespace

std::string event_file_version(double wall_time) {
  pb::Event event = make_event(wall_time, 0);
  event.set_file_version("brain.Event:2");
  return event.SerializeAsString();
}

std::string event_scalars(double wall_time, int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  pb::Event event = make_event(wall_time, step);
  pb::Summary& summary = *event.mutable_summary();
  for (const auto& [tag, number] : values) {
    pb::Summary::Value& value = *summary.add_value();
    value.set_tag(tag);
    value.set_simple_value(static_cast<float>(number));
  }
  return event.SerializeAsString();
}

std::string event_text(double wall_time, int64_t step, std::string_view tag, std::string_view markdown) {
  pb::Event event = make_event(wall_time, step);
  pb::Summary::Value& value = *event.mutable_summary()->add_value();
  value.set_tag(std::string(tag));
  value.mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  value.mutable_metadata()->set_data_class(pb::DATA_CLASS_TENSOR);
  pb::TensorProto& tensor = *value.mutable_tensor();
  tensor.set_dtype(pb::DT_STRING);
  tensor.mutable_tensor_shape(); // present and empty: a scalar
  tensor.add_string_val(std::string(markdown));
  return event.SerializeAsString();
}

std::string event_images(double wall_time, int64_t step,
                         const std::vector<std::pair<std::string, std::string>>& tagged_pngs) {
  static constexpr std::string_view kSignature = "\x89PNG\r\n\x1a\n";
  pb::Event event = make_event(wall_time, step);
  for (const auto& [tag, png] : tagged_pngs) {
    // The IHDR chunk comes first: width and height at bytes 16 and 20, the colour type at 25.
    if (png.size() < 33 || std::string_view(png).substr(0, 8) != kSignature || png.compare(12, 4, "IHDR") != 0)
      throw Error("TensorBoard image '" + tag + "': the file is not a PNG (" + std::to_string(png.size()) + " bytes).");
    pb::Summary::Value& value = *event.mutable_summary()->add_value();
    value.set_tag(tag);
    pb::Summary::Image& image = *value.mutable_image();
    image.set_width(static_cast<int32_t>(big_endian_u32(png, 16)));
    image.set_height(static_cast<int32_t>(big_endian_u32(png, 20)));
    image.set_colorspace(colorspace_of(static_cast<unsigned char>(png[25])));
    image.set_encoded_image_string(png);
  }
  return event.SerializeAsString();
}

namespace {

void set_hparam_value(pb::HParamValue& out, const HParam& hparam) {
  if (const auto* number = std::get_if<double>(&hparam.value)) out.set_number_value(*number);
  else if (const auto* flag = std::get_if<bool>(&hparam.value)) out.set_bool_value(*flag);
  else out.set_string_value(std::get<std::string>(hparam.value));
}

pb::HParamDataType hparam_type(const HParam& hparam) {
  if (std::holds_alternative<double>(hparam.value)) return pb::DATA_TYPE_FLOAT64;
  if (std::holds_alternative<bool>(hparam.value)) return pb::DATA_TYPE_BOOL;
  return pb::DATA_TYPE_STRING;
}

}  // namespace

std::string event_hparams_start(double wall_time, const std::vector<HParam>& hparams) {
  pb::HParamsPluginData data;
  pb::SessionStartInfo& start = *data.mutable_session_start_info();
  start.set_start_time_secs(wall_time);
  for (const HParam& hparam : hparams) set_hparam_value((*start.mutable_hparams())[hparam.name], hparam);
  return hparams_event(wall_time, 0, kHParamsSessionStartTag, data);
}

std::string event_hparams_experiment(double wall_time, const std::vector<HParam>& hparams,
                                     const std::vector<std::string>& metric_tags) {
  pb::HParamsPluginData data;
  pb::Experiment& experiment = *data.mutable_experiment();
  experiment.set_time_created_secs(wall_time);
  for (const HParam& hparam : hparams) {
    pb::HParamInfo& info = *experiment.add_hparam_infos();
    info.set_name(hparam.name);
    info.set_type(hparam_type(hparam));
  }
  for (const std::string& tag : metric_tags) experiment.add_metric_infos()->mutable_name()->set_tag(tag);
  return hparams_event(wall_time, 0, kHParamsExperimentTag, data);
}

std::string event_hparams_end(double wall_time, int64_t step) {
  pb::HParamsPluginData data;
  pb::SessionEndInfo& end = *data.mutable_session_end_info();
  end.set_status(pb::STATUS_SUCCESS);
  end.set_end_time_secs(wall_time);
  return hparams_event(wall_time, step, kHParamsSessionEndTag, data);
}

EventInfo inspect_event(std::string_view bytes) {
  pb::Event event;
  EventInfo info;
  if (!event.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) return info;
  info.parsed = true;
  info.step = event.step();
  info.file_version = event.has_file_version();
  if (event.has_summary())
    for (const pb::Summary::Value& value : event.summary().value()) info.tags.push_back(value.tag());
  return info;
}

}  // namespace tp
