// The C API (tp/infer/infer.h) over tp::infer::Model: every entry catches whatever the C++ side
// throws and turns it into a status and the calling thread's message, so nothing crosses into C.
#include "tp/infer/infer.h"

#include <algorithm>
#include <climits>
#include <exception>
#include <iterator>
#include <new>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tp/framework/plugin/host_services.h"
#include "tp/infer/model.h"

struct tp_infer_model_t {
  tp::infer::Model model;
};

struct tp_infer_result_t {
  tp::infer::Batch batch;
};

namespace {

// The calling thread's last message: per thread, as the host keeps a plugin's fail() message
// (tp/host.h), so threads sharing a model never read each other's errors.
thread_local std::string last_error;

// top_k as the C++ API takes it. Every top_k is capped at the class count, so one past INT_MAX
// means "every class" as it would there (a plain cast made 2^32 - 1 read as -1, refused).
int capped(uint32_t top_k) { return static_cast<int>(std::min<uint32_t>(top_k, INT_MAX)); }

tp_status failed(tp_status status, std::string message) {
  last_error = std::move(message);
  return status;
}

// The status of an Error's kind (model.h lists which failures are which), so that a caller tells
// its client's bad request from its own fault without reading the message (serving trial F2).
tp_status status_of(tp::infer::Error::Kind kind) {
  switch (kind) {
    case tp::infer::Error::Kind::BadInput: return TP_ERR_INVALID_ARGUMENT;
    case tp::infer::Error::Kind::Setup: return TP_ERR_CONFIG;
    case tp::infer::Error::Kind::OutOfMemory: return TP_ERR_OUT_OF_MEMORY;
    case tp::infer::Error::Kind::Internal: break;
  }
  return TP_ERR_INTERNAL;
}

// A refusal already reported by tensor_of (its message in last_error), thrown out of guarded's
// body so that the tensors copied so far are released.
struct Refused {
  tp_status status;
};

template <class Body>
tp_status guarded(Body&& body) noexcept {
  try {
    last_error.clear();
    body();
    return TP_OK;
  } catch (const Refused& refusal) {
    return refusal.status;
  } catch (const tp::infer::Error& e) {
    return failed(status_of(e.kind()), e.what());
  } catch (const std::bad_alloc&) {
    return failed(TP_ERR_OUT_OF_MEMORY, "tp::infer: out of memory; run smaller batches.");
  } catch (const std::exception& e) {
    return failed(TP_ERR_INTERNAL, std::string("tp::infer: ") + e.what() + " (a bug of the C API; please report it).");
  } catch (...) {
    return failed(TP_ERR_INTERNAL, "tp::infer: an unknown exception; this is a bug, please report it.");
  }
}

// An argument check's status with its message; the message is lost only when building it runs
// out of memory, so that nothing is thrown into C.
template <class Message>
tp_status refused(tp_status status, Message&& message) noexcept {
  try {
    return failed(status, message());
  } catch (...) {
    return status;
  }
}

tp_status null_argument(const char* function, const char* argument) noexcept {
  return refused(TP_ERR_INVALID_ARGUMENT, [&] {
    return std::string("tp::infer: ") + function + ": `" + argument + "` is NULL; pass a valid pointer.";
  });
}

tp_status no_images(const char* function) noexcept {
  return refused(TP_ERR_INVALID_ARGUMENT,
                 [&] { return std::string("tp::infer: ") + function + ": `count` is 0; pass one image or more."; });
}

// tp_infer_open's plugin_dir: one directory, or several separated by ':' (as TORCHHOST_PLUGIN_PATH).
std::vector<std::string> plugin_dirs_of(const char* plugin_dir) {
  std::vector<std::string> dirs;
  std::stringstream list(plugin_dir);
  for (std::string dir; std::getline(list, dir, ':');)
    if (!dir.empty()) dirs.push_back(dir);
  return dirs;
}

// Which argument of which function a prepared tensor came from, for its refusals: `at` is ""
// for tp_infer_run_tensor's one (`shape`), "[i]" for tp_infer_run_tensors' i-th (`shapes[i]`).
struct TensorArgument {
  const char* function;
  std::string at;
  std::string named(const char* one, const char* many) const { return at.empty() ? one : many + at; }
};

// One prepared float32 tensor as the C++ API takes it: the shape checked and `data` copied (the
// caller may free its buffers once the call returns), or the refusal naming the argument.
tp_status tensor_of(const TensorArgument& argument, const char* name, const float* data, const int64_t* shape,
                    uint32_t ndim, tp::infer::Tensor& out) {
  const auto refuse = [&](const std::string& message) {
    return refused(TP_ERR_INVALID_ARGUMENT,
                   [&] { return std::string("tp::infer: ") + argument.function + ": " + message; });
  };
  if (name == nullptr) return refuse("`" + argument.named("name", "names") + "` is NULL; pass a valid pointer.");
  if (shape == nullptr && ndim > 0)
    return refuse("`" + argument.named("shape", "shapes") + "` is NULL; pass a valid pointer.");
  int64_t count = 1;
  for (uint32_t i = 0; i < ndim; ++i) {
    if (shape[i] < 0 || __builtin_mul_overflow(count, shape[i], &count))
      return refuse(argument.named("shape", "shapes") + "[" + std::to_string(i) + "] is " + std::to_string(shape[i]) +
                    (shape[i] < 0 ? "; sizes are 0 or more." : ", and the shape's element count overflows int64."));
  }
  if (ndim == 0 || count == 0)
    return refuse("`" + argument.named("shape", "shapes") + "` holds no element (ndim " + std::to_string(ndim) + "); pass [N, ...] with N >= 1 and no size 0.");
  if (data == nullptr) return refuse("`" + argument.named("data", "data") + "` is NULL; pass a valid pointer.");
  out = tp::infer::Tensor{name, std::vector<int64_t>(shape, shape + ndim), std::vector<float>(data, data + count)};
  return TP_OK;
}

tp_status to_result(tp::infer::Batch batch, tp_infer_result_t** out_result) {
  *out_result = new tp_infer_result_t{std::move(batch)};
  return TP_OK;
}

}  // namespace

extern "C" {

const char* tp_infer_last_error(void) { return last_error.c_str(); }

const char* tp_infer_status_name(tp_status status) { return tp::status_name(status); }

tp_status tp_infer_open(const char* export_file, const char* device, const char* plugin_dir,
                        tp_infer_model_t** out_model) {
  return tp_infer_open_with(export_file, device, plugin_dir, 0, out_model);
}

tp_status tp_infer_open_with(const char* export_file, const char* device, const char* plugin_dir, uint32_t flags,
                             tp_infer_model_t** out_model) {
  return tp_infer_open_configured(export_file, device, plugin_dir, flags, nullptr, 0, out_model);
}

tp_status tp_infer_open_configured(const char* export_file, const char* device, const char* plugin_dir, uint32_t flags,
                                   const char* const* model_options, uint32_t option_count,
                                   tp_infer_model_t** out_model) {
  if (out_model == nullptr) return null_argument("tp_infer_open", "out_model");
  *out_model = nullptr;
  if (export_file == nullptr) return null_argument("tp_infer_open", "export_file");
  if (plugin_dir == nullptr) return null_argument("tp_infer_open", "plugin_dir");
  if ((flags & ~TP_INFER_OPEN_ALLOW_FILES_OUTSIDE_EXPORT) != 0)
    return refused(TP_ERR_INVALID_ARGUMENT, [&] {
      return "tp::infer: tp_infer_open_with: flags " + std::to_string(flags) +
             " hold bits this library does not define; pass 0 or TP_INFER_OPEN_ALLOW_FILES_OUTSIDE_EXPORT.";
    });
  if (option_count > 0 && model_options == nullptr) return null_argument("tp_infer_open_configured", "model_options");
  for (uint32_t i = 0; i < option_count; ++i)
    if (model_options[i] == nullptr)
      return refused(TP_ERR_INVALID_ARGUMENT, [&] {
        return "tp::infer: tp_infer_open_configured: model_options[" + std::to_string(i) + "] is NULL; give " +
               std::to_string(option_count) + " strings \"key=value\", or a smaller option_count.";
      });
  return guarded([&] {
    tp::infer::OpenOptions options{.device = device != nullptr ? device : "cpu", .plugin_dirs = plugin_dirs_of(plugin_dir)};
    options.allow_files_outside_export = (flags & TP_INFER_OPEN_ALLOW_FILES_OUTSIDE_EXPORT) != 0;
    options.model_options.assign(model_options, model_options + option_count);
    *out_model = new tp_infer_model_t{tp::infer::Model::open(export_file, options)};
  });
}

void tp_infer_close(tp_infer_model_t* model) { delete model; }

tp_status tp_infer_set_threads(tp_infer_model_t* model, uint32_t threads) {
  if (model == nullptr) return null_argument("tp_infer_set_threads", "model");
  if (threads > static_cast<uint32_t>(INT_MAX))
    return refused(TP_ERR_INVALID_ARGUMENT, [&] {
      return "tp::infer: tp_infer_set_threads: " + std::to_string(threads) + " threads; give 0 (LibTorch's count) or a count of cores.";
    });
  return guarded([&] { model->model.set_threads(static_cast<int>(threads)); });
}

tp_status tp_infer_set_log(tp_infer_log_fn log, void* user_data, int32_t least_level) {
  if (least_level < TP_INFER_LOG_DEBUG || least_level > TP_INFER_LOG_ERROR)
    return refused(TP_ERR_INVALID_ARGUMENT, [&] {
      return "tp::infer: tp_infer_set_log: level " + std::to_string(least_level) +
             " is none of TP_INFER_LOG_DEBUG (0), _INFO (1), _WARNING (2) or _ERROR (3).";
    });
  tp::infer::LogFunction function;
  if (log != nullptr)
    function = [log, user_data](tp::infer::LogLevel level, const std::string& source, const std::string& message) {
      log(user_data, static_cast<int32_t>(level), source.c_str(), message.c_str());
    };
  return guarded([&] { tp::infer::set_log(std::move(function), static_cast<tp::infer::LogLevel>(least_level)); });
}

uint32_t tp_infer_model_class_count(const tp_infer_model_t* model) {
  return model == nullptr ? 0 : static_cast<uint32_t>(model->model.class_names().size());
}

const char* tp_infer_model_class_name(const tp_infer_model_t* model, uint32_t index) {
  if (model == nullptr || index >= model->model.class_names().size()) return nullptr;
  return model->model.class_names()[index].c_str();
}

const char* tp_infer_model_component(const tp_infer_model_t* model) {
  return model == nullptr ? nullptr : model->model.component().c_str();
}

const char* tp_infer_version(void) {
  // Built once, on the first call (a thread-safe static); never freed.
  static const std::string text = [] {
    try {
      return tp::infer::version();
    } catch (...) {
      return std::string("torchhost (version unknown: out of memory)");
    }
  }();
  return text.c_str();
}

tp_status tp_infer_run_files(tp_infer_model_t* model, const char* const* paths, uint32_t count, uint32_t top_k,
                             tp_infer_result_t** out_result) {
  if (out_result == nullptr) return null_argument("tp_infer_run_files", "out_result");
  *out_result = nullptr;
  if (model == nullptr) return null_argument("tp_infer_run_files", "model");
  if (count == 0) return no_images("tp_infer_run_files");
  if (paths == nullptr) return null_argument("tp_infer_run_files", "paths");
  for (uint32_t i = 0; i < count; ++i)
    if (paths[i] == nullptr) return null_argument("tp_infer_run_files", "paths[i]");
  return guarded([&] {
    const std::vector<std::string> files(paths, paths + count);
    to_result(model->model.run_files(files, capped(top_k)), out_result);
  });
}

tp_status tp_infer_run_encoded(tp_infer_model_t* model, const uint8_t* const* data, const uint64_t* sizes,
                               uint32_t count, uint32_t top_k, tp_infer_result_t** out_result) {
  if (out_result == nullptr) return null_argument("tp_infer_run_encoded", "out_result");
  *out_result = nullptr;
  if (model == nullptr) return null_argument("tp_infer_run_encoded", "model");
  if (count == 0) return no_images("tp_infer_run_encoded");
  if (data == nullptr || sizes == nullptr) return null_argument("tp_infer_run_encoded", "data or sizes");
  for (uint32_t i = 0; i < count; ++i) {
    if (data[i] == nullptr && sizes[i] > 0) return null_argument("tp_infer_run_encoded", "data[i]");
    // Before the copy: UINT64_MAX gave "cannot create std::vector larger than max_size()", and
    // 2^40 read that far past the caller's buffer (security trial F15).
    if (sizes[i] > TP_INFER_MAX_ENCODED_BYTES)
      return refused(TP_ERR_INVALID_ARGUMENT, [&] {
        return "tp::infer: tp_infer_run_encoded: sizes[" + std::to_string(i) + "] is " + std::to_string(sizes[i]) +
               " bytes, more than the " + std::to_string(TP_INFER_MAX_ENCODED_BYTES) +
               " (1 GiB) an image may hold; pass each image's own size, that of the bytes at data[" +
               std::to_string(i) + "].";
      });
  }
  return guarded([&] {
    std::vector<std::vector<unsigned char>> images;
    for (uint32_t i = 0; i < count; ++i) images.emplace_back(data[i], data[i] + sizes[i]);
    to_result(model->model.run_encoded(images, capped(top_k)), out_result);
  });
}

tp_status tp_infer_run_tensor(tp_infer_model_t* model, const char* name, const float* data, const int64_t* shape,
                              uint32_t ndim, uint32_t top_k, tp_infer_result_t** out_result) {
  if (out_result == nullptr) return null_argument("tp_infer_run_tensor", "out_result");
  *out_result = nullptr;
  if (model == nullptr) return null_argument("tp_infer_run_tensor", "model");
  return guarded([&] {
    std::vector<tp::infer::Tensor> inputs(1);
    const tp_status status = tensor_of({"tp_infer_run_tensor", ""}, name, data, shape, ndim, inputs[0]);
    if (status != TP_OK) throw Refused{status};
    to_result(model->model.run_tensors(inputs, capped(top_k)), out_result);
  });
}

tp_status tp_infer_run_tensors(tp_infer_model_t* model, const char* const* names, const float* const* data,
                               const int64_t* const* shapes, const uint32_t* ndims, uint32_t count, uint32_t top_k,
                               tp_infer_result_t** out_result) {
  const char* const function = "tp_infer_run_tensors";
  if (out_result == nullptr) return null_argument(function, "out_result");
  *out_result = nullptr;
  if (model == nullptr) return null_argument(function, "model");
  if (count == 0)
    return refused(TP_ERR_INVALID_ARGUMENT, [&] {
      return std::string("tp::infer: tp_infer_run_tensors: `count` is 0; pass one tensor per model input field.");
    });
  if (names == nullptr || data == nullptr || shapes == nullptr || ndims == nullptr)
    return null_argument(function, "names, data, shapes or ndims");
  return guarded([&] {
    std::vector<tp::infer::Tensor> inputs(count);
    for (uint32_t i = 0; i < count; ++i) {
      const tp_status status = tensor_of({function, "[" + std::to_string(i) + "]"}, names[i], data[i], shapes[i],
                                         ndims[i], inputs[i]);
      if (status != TP_OK) throw Refused{status};
    }
    to_result(model->model.run_tensors(inputs, capped(top_k)), out_result);
  });
}

void tp_infer_result_free(tp_infer_result_t* result) { delete result; }

uint32_t tp_infer_result_output_count(const tp_infer_result_t* result) {
  return result == nullptr ? 0 : static_cast<uint32_t>(result->batch.outputs.size());
}

tp_status tp_infer_result_output(const tp_infer_result_t* result, uint32_t index, const char** out_name,
                                 const int64_t** out_shape, uint32_t* out_ndim, const float** out_values) {
  if (result == nullptr) return null_argument("tp_infer_result_output", "result");
  if (index >= result->batch.outputs.size())
    return refused(TP_ERR_OUT_OF_RANGE, [&] {
      return "tp::infer: tp_infer_result_output: output " + std::to_string(index) + " of " +
             std::to_string(result->batch.outputs.size()) + "; ask for one below tp_infer_result_output_count.";
    });
  const tp::infer::Tensor& output = result->batch.outputs[index];
  if (out_name != nullptr) *out_name = output.name.c_str();
  if (out_shape != nullptr) *out_shape = output.shape.data();
  if (out_ndim != nullptr) *out_ndim = static_cast<uint32_t>(output.shape.size());
  if (out_values != nullptr) *out_values = output.values.data();
  return TP_OK;
}

uint32_t tp_infer_result_class_count(const tp_infer_result_t* result, uint32_t image) {
  if (result == nullptr || image >= result->batch.top.size()) return 0;
  return static_cast<uint32_t>(result->batch.top[image].size());
}

tp_status tp_infer_result_class(const tp_infer_result_t* result, uint32_t image, uint32_t rank, int64_t* out_class,
                                const char** out_name, float* out_probability) {
  if (result == nullptr) return null_argument("tp_infer_result_class", "result");
  if (image >= result->batch.top.size() || rank >= result->batch.top[image].size())
    return refused(TP_ERR_OUT_OF_RANGE, [&] {
      return "tp::infer: tp_infer_result_class: image " + std::to_string(image) + ", rank " + std::to_string(rank) +
             " is past the result; ask below tp_infer_result_class_count(result, image).";
    });
  const tp::infer::ClassScore& score = result->batch.top[image][rank];
  if (out_class != nullptr) *out_class = score.index;
  if (out_name != nullptr) *out_name = score.name.c_str();
  if (out_probability != nullptr) *out_probability = score.probability;
  return TP_OK;
}

const char* tp_infer_model_metadata(const tp_infer_model_t* model, const char* key) {
  if (model == nullptr || key == nullptr) return nullptr;
  try {
    const auto& entries = model->model.metadata();
    const auto found = entries.find(key);
    return found != entries.end() ? found->second.c_str() : nullptr;
  } catch (const std::exception&) {
    return nullptr; // a moved-from model: nothing to lend
  }
}

uint32_t tp_infer_model_metadata_count(const tp_infer_model_t* model) {
  if (model == nullptr) return 0;
  try {
    return static_cast<uint32_t>(model->model.metadata().size());
  } catch (const std::exception&) {
    return 0;
  }
}

const char* tp_infer_model_metadata_key(const tp_infer_model_t* model, uint32_t index) {
  if (model == nullptr) return nullptr;
  try {
    const auto& entries = model->model.metadata();
    if (index >= entries.size()) return nullptr;
    return std::next(entries.begin(), static_cast<std::ptrdiff_t>(index))->first.c_str();
  } catch (const std::exception&) {
    return nullptr;
  }
}

tp_status tp_infer_set_skip_bad_images(tp_infer_model_t* model, int skip) {
  if (model == nullptr) return null_argument("tp_infer_set_skip_bad_images", "model");
  return guarded([&] { model->model.set_skip_bad_images(skip != 0); });
}

tp_status tp_infer_set_max_image_pixels(tp_infer_model_t* model, uint64_t pixels) {
  if (model == nullptr) return null_argument("tp_infer_set_max_image_pixels", "model");
  if (pixels > static_cast<uint64_t>(INT64_MAX))
    return refused(TP_ERR_INVALID_ARGUMENT, [&] {
      return "tp::infer: tp_infer_set_max_image_pixels: " + std::to_string(pixels) +
             " pixels; give 0 (the export's own limit) or the most pixels one image may declare.";
    });
  return guarded([&] { model->model.set_max_image_pixels(static_cast<int64_t>(pixels)); });
}

int64_t tp_infer_result_row(const tp_infer_result_t* result, uint32_t row) {
  if (result == nullptr || row >= result->batch.rows.size()) return -1;
  return result->batch.rows[row];
}

uint32_t tp_infer_result_failed_count(const tp_infer_result_t* result) {
  return result == nullptr ? 0 : static_cast<uint32_t>(result->batch.failed.size());
}

tp_status tp_infer_result_failed(const tp_infer_result_t* result, uint32_t index, int64_t* out_image,
                                 const char** out_message) {
  if (result == nullptr) return null_argument("tp_infer_result_failed", "result");
  if (index >= result->batch.failed.size())
    return refused(TP_ERR_OUT_OF_RANGE, [&] {
      return "tp::infer: tp_infer_result_failed: " + std::to_string(index) + " of " +
             std::to_string(result->batch.failed.size()) + "; ask for one below tp_infer_result_failed_count.";
    });
  const tp::infer::FailedImage& image = result->batch.failed[index];
  if (out_image != nullptr) *out_image = image.index;
  if (out_message != nullptr) *out_message = image.message.c_str();
  return TP_OK;
}

}  // extern "C"
