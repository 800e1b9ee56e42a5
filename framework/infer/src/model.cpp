// tp::infer::Model (model.h): the framework's own pieces, in the order `host predict` uses them:
// the registry loads the plugins (ABI and LibTorch fingerprint checks), ModelProxy builds the
// network through the C ABI, BatchPlacement puts it on the device, restore_weights fills it; for
// files, a DatasetProxy of the export's evaluation table reads them (image_folder's `files`, as
// `host predict --images` gives them) and collate stacks them as the loader does.
#include "tp/infer/model.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <numeric>
#include <set>

#include "batch_answer.h"
#include "decode_limit.h"
#include "export_file.h"
#include "export_format.h"
#include "model_files.h"
#include "model_options.h"
#include "failure.h"
#include "input_names.h"
#include "open_checks.h"
#include "private_directory.h"
#include "process_share.h"
#include "tp/framework/exception_text.h"
#include "tp/framework/config/secrets.h"
#include "tp/framework/config/validate.h"
#include "tp/framework/data/collate.h"
#include "tp/framework/engine/batch_placement.h"
#include "tp/framework/engine/version_text.h"
#include "tp/framework/error.h"
#include "tp/framework/plugin/dataset_proxy.h"
#include "tp/framework/plugin/model_proxy.h"
#include "tp/framework/plugin/registry.h"
#include "tp/framework/plugin/host_services.h"
#include "tp/framework/util/log.h"
#include "tp/infer/infer.h"

namespace tp::infer {

struct Model::State {
  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  // The model's destroy is a plugin call: it takes the process's turn (process_share.h). Then the
  // registry, whose libraries and host table the share keeps until the last open model leaves it.
  ~State() {
    const std::lock_guard<std::mutex> turn(share.calls());
    model.reset();
    placement.reset();
    registry.reset();
  }

  /// One call on the model, from its start to its return: closing waits for every one in flight.
  /// Throws Error when the model is being closed, before the call reads anything of it.
  class Flight {
   public:
    explicit Flight(State& state) : state_(state) {
      const std::lock_guard<std::mutex> lock(state_.flight_mutex);
      if (state_.closing)
        throw Error("tp::infer: the model '" + state_.source + "' is being closed; a call must not overlap "
                    "closing it (a call begun after the close returned uses a freed model).", Error::Kind::BadInput);
      ++state_.in_flight;
    }
    ~Flight() {
      const std::lock_guard<std::mutex> lock(state_.flight_mutex);
      if (--state_.in_flight == 0) state_.landed.notify_all();
    }
    Flight(const Flight&) = delete;
    Flight& operator=(const Flight&) = delete;

   private:
    State& state_;
  };

  /// Refuses calls from now on and waits for those in flight (Model's destructor, before the
  /// state goes): a caller waiting for the process's turn would otherwise wake in freed memory.
  void close() {
    std::unique_lock<std::mutex> lock(flight_mutex);
    closing = true;
    landed.wait(lock, [&] { return in_flight == 0; });
  }

  detail::ProcessShare share;
  std::string source; ///< the export file, for messages and validation
  std::string plugin_dirs; ///< where the plugins were looked for, for messages
  bool preprocessing_loaded = false; ///< a loaded library provides `preprocessing`'s component (set at open)
  std::atomic<int> threads{0}; ///< OpenOptions::threads, changed by set_threads; 0 resolved to share.default_threads()
  std::atomic<bool> skip_bad_images{false}; ///< OpenOptions::skip_bad_images, changed by set_skip_bad_images
  std::atomic<int64_t> max_image_pixels{0}; ///< OpenOptions::max_image_pixels, changed by set_max_image_pixels
  std::vector<std::string> classes;
  bool sigmoid_scores = false;  ///< the export's torchhost.scores = "sigmoid" (a binary cross entropy trained it)
  detail::ExportedComponent preprocessing;
  std::unique_ptr<Registry> registry;
  std::unique_ptr<BatchPlacement> placement;
  std::unique_ptr<ModelProxy> model;
  std::string component;
  std::vector<std::string> inputs; ///< the fields the model reads (input_names.h); empty: not known
  std::map<std::string, std::string> metadata; ///< the export's, as read
  std::mutex flight_mutex; ///< guards in_flight and closing
  std::condition_variable landed;
  int in_flight = 0;
  bool closing = false;
};

namespace {

using detail::FailureKinds;
using detail::guarded;
using Kind = Error::Kind;

// Opening reads the deployment's pieces: what fails there is Setup unless it says otherwise.
constexpr FailureKinds kOpening{Kind::Setup, Kind::Setup};
// run_files and run_encoded: the inputs are the export's preprocessing's, made from the files.
constexpr FailureKinds kFromFiles{};
// run_tensors: the caller made the inputs; a model that refuses them refuses the caller's input.
constexpr FailureKinds kFromTensors{Kind::Internal, Kind::BadInput};
// The setters: only the caller's argument or a moved-from Model can be wrong.
constexpr FailureKinds kArgument{Kind::BadInput, Kind::BadInput};

// [under the process's turn] LibTorch's intra-op threads for the call beginning on this thread:
// OpenMP keeps the count per thread, so it is set by the thread that runs the call. `threads` is
// never 0: leaving the count as found ran a threads = 0 model on whatever count another model's
// call had left as the process's default (serving trial F1). A forked child runs on 1 (F7).
void use_threads(const detail::ProcessShare& share, int threads) {
  threads = share.call_threads(threads);
  if (at::get_num_threads() != threads) at::set_num_threads(threads);
}

// OpenOptions::max_image_pixels: a negative limit is no limit the datasets know.
void check_pixel_limit(int64_t pixels) {
  if (pixels < 0)
    throw Error("tp::infer: max_image_pixels is " + std::to_string(pixels) + "; give 0 (the export's own limit) or "
                "the most pixels (width x height) one image may declare.", Kind::BadInput);
}

}  // namespace

const Tensor& Batch::output(const std::string& name) const {
  for (const Tensor& tensor : outputs)
    if (tensor.name == name) return tensor;
  std::string names;
  for (const Tensor& tensor : outputs) names += (names.empty() ? "" : ", ") + tensor.name;
  throw Error("tp::infer: the model returned no output '" + name + "'; its outputs: " + names + ".", Kind::BadInput);
}

Model::Model(std::unique_ptr<State> state) : state_(std::move(state)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&& other) noexcept {
  if (this != &other) {
    if (state_) state_->close();
    state_ = std::move(other.state_);
  }
  return *this;
}
Model::~Model() {
  if (state_) state_->close();
}

Model Model::open(const std::string& export_file, const OpenOptions& options) {
  return guarded(kOpening, [&] {
    detail::ExportFile file = guarded(kOpening, [&] {
      // Every refusal of the file is the deployment's: missing, unreadable, damaged, forged.
      try {
        return detail::read_export(export_file);
      } catch (const Error& e) {
        throw Error(e.what(), e.kind() == Kind::OutOfMemory ? Kind::OutOfMemory : Kind::Setup);
      }
    });
    // Before any key is read for its meaning (serving trial F3: format 2, 7 and "banana" opened silently).
    detail::check_export_format(file.metadata, export_file);
    const c10::Device device = detail::device_of(options.device);
    detail::check_threads(options.threads);
    check_pixel_limit(options.max_image_pixels);
    if (options.plugin_dirs.empty())
      throw Error("tp::infer: no plugin directory was given, and the model '" + file.model.component +
                  "' is built by its plugin; set OpenOptions::plugin_dirs (tp_infer_open's plugin_dir in C) to the "
                  "directory holding it (the installed host's lib/torchhost/plugins for the built-in plugins).",
                  Kind::BadInput);
    auto state = std::make_unique<State>();
    // After `state`, so released before it on a failure: its destruction takes the turn too.
    const std::lock_guard<std::mutex> turn(state->share.calls());
    if (device.is_cuda()) state->share.use_cuda_tf32(options.tf32, export_file);
    state->source = export_file;
    state->threads = options.threads > 0 ? options.threads : state->share.default_threads();
    // Restoring the weights copies in parallel: on the model's count, as its calls run (in a
    // forked child on 1, where more would wait for OpenMP threads the fork left behind).
    use_threads(state->share, state->threads);
    state->skip_bad_images = options.skip_bad_images;
    state->max_image_pixels = options.max_image_pixels;
    state->plugin_dirs = detail::searched_dirs(options);
    state->classes = std::move(file.classes);
    state->sigmoid_scores = file.sigmoid_scores;
    state->preprocessing = std::move(file.preprocessing);
    state->component = file.model.component;
    state->metadata = std::move(file.metadata);
    detail::warn_about_export_versions(state->share.host().logger(), state->metadata, export_file);
    state->registry = std::make_unique<Registry>(state->share.host());
    state->registry->use_loader([&share = state->share](const std::filesystem::path& file) { return share.load(file); });
    std::vector<PluginDir> dirs;
    // Named by the caller's option, which makes a missing directory an error, not silently skipped.
    for (const std::string& dir : options.plugin_dirs) dirs.push_back({dir, "OpenOptions::plugin_dirs"});
    state->registry->load_search_path(dirs);
    const std::vector<ComponentEntry> loaded = state->registry->all();
    if (!detail::provides(loaded, file.model.component)) {
      throw Error("tp::infer: the export's model '" + file.model.component + "' is built by its plugin, which no "
                  "library in the plugin directories (" + state->plugin_dirs + ") provides. Add the directory holding that "
                  "plugin to OpenOptions::plugin_dirs (in C, to tp_infer_open's ':'-separated plugin_dir; the "
                  "export's torchhost.plugin_files names its file; the built-in ones are in the installed host's "
                  "lib/torchhost/plugins).",
                  Kind::Setup);
    }
    // The registry is fixed from here on: run_files asks this, not the registry, on every call.
    state->preprocessing_loaded =
        state->preprocessing.component.empty() || detail::provides(loaded, state->preprocessing.component);
    detail::warn_about_plugins(state->share.host().logger(), loaded, file.model.component, state->preprocessing.component,
                       state->preprocessing_loaded, file.plugin_files, export_file, state->plugin_dirs);
    ComponentConfig config{file.model.component, "model", std::move(file.model.options)};
    detail::apply_model_options(config.options, options.model_options);
    for (const std::string& change : options.model_options)
      state->share.host().logger().write(tp::LogLevel::Info, "tp::infer", "model option " + redact_uri_credentials(change) + " (OpenOptions::model_options)");
    const ComponentEntry entry = state->registry->find(config.component, TP_KIND_MODEL, "model");
    validate_component(config, entry.info->schema, export_file);
    state->inputs = detail::declared_inputs(config);
    // Before the plugin sees the table: a file it would load may be code (security trial F5).
    detail::check_model_files(config, entry.info->schema, export_file, options.allow_files_outside_export,
                              state->share.host().logger());
    state->model = std::make_unique<ModelProxy>(entry, config);
    state->placement = std::make_unique<BatchPlacement>(device, /*channels_last=*/false);
    const std::vector<StateTensor> model_state = state->placement->place_model(*state->model);
    restore_weights(file.weights, model_state);
    state->model->set_training(false);
    return Model(std::move(state));
  });
}

Model::State& Model::state() const {
  if (!state_)
    throw Error("tp::infer: this Model was moved from and holds no model; call the Model it was moved to, or "
                "open the export again.", Kind::BadInput);
  return *state_;
}

const std::vector<std::string>& Model::class_names() const { return state().classes; }

void Model::set_skip_bad_images(bool skip) {
  guarded(kArgument, [&] { state().skip_bad_images = skip; });
}

void Model::set_max_image_pixels(int64_t pixels) {
  guarded(kArgument, [&] {
    check_pixel_limit(pixels);
    state().max_image_pixels = pixels;
  });
}

void Model::set_threads(int threads) {
  guarded(kArgument, [&] {
    detail::check_threads(threads);
    state().threads = threads > 0 ? threads : state().share.default_threads();
  });
}
const std::string& Model::component() const { return state().component; }
const std::map<std::string, std::string>& Model::metadata() const { return state().metadata; }

void set_log(LogFunction function, LogLevel least) {
  if (static_cast<int>(least) < static_cast<int>(LogLevel::Debug) || static_cast<int>(least) > static_cast<int>(LogLevel::Error))
    throw Error("tp::infer: set_log: level " + std::to_string(static_cast<int>(least)) +
                " is none of LogLevel's (Debug, Info, Warning, Error).", Error::Kind::BadInput);
  detail::ProcessShare::route_log(std::move(function), least);
}

std::string version() {
  // host --version's lines, joined: the library is built from the same tree as the host.
  std::string text = host_version_text(), line;
  for (std::size_t at = 0; (at = text.find('\n')) != std::string::npos;) {
    std::string part = text.substr(0, at);
    text.erase(0, at + 1);
    if (part.starts_with("built with ")) continue; // the compiler is the build's, not the library's answer
    line += (line.empty() ? "" : "; ") + part;
  }
  return line;
}

Batch Model::run_files(const std::vector<std::string>& paths, int top_k) {
  return guarded(kFromFiles, [&] {
    const State::Flight flight(state());
    if (paths.empty()) throw Error("tp::infer: run_files was given no file; give one path or more.", Kind::BadInput);
    for (std::size_t i = 0; i < paths.size(); ++i)
      if (paths[i].empty())
        throw Error("tp::infer: path " + std::to_string(i) + " is empty; give an image file.", Kind::BadInput);
    const detail::ExportedComponent& pre = state().preprocessing;
    if (pre.component.empty())
      throw Error("tp::infer: the export '" + state().source + "' carries no evaluation preprocessing "
                  "(torchhost.preprocessing); prepare the inputs yourself and call run_tensors.",
                  Kind::Setup);
    const std::lock_guard<std::mutex> turn(state().share.calls());
    use_threads(state().share, state().threads);
    if (!state().preprocessing_loaded)
      throw Error("tp::infer: the export '" + state().source + "' reads images with '" + pre.component + "', which "
                  "no library in the plugin directories (" + state().plugin_dirs + ") provides. Add the directory "
                  "holding its plugin (the export's torchhost.plugin_files names the file) to OpenOptions::plugin_dirs "
                  "(tp_infer_open's plugin_dir in C), or prepare the inputs yourself and call run_tensors.",
                  Kind::Setup);
    const ComponentEntry entry = state().registry->find(pre.component, TP_KIND_DATASET, "preprocessing");
    const bool reads_files = std::any_of(entry.info->schema.begin(), entry.info->schema.end(), [](const KeySpec& key) {
      return key.path == "files" && key.type == ValueType::StringArray;
    });
    if (!reads_files)
      throw Error("tp::infer: the export's dataset '" + pre.component + "' cannot read plain image files (it "
                  "declares no `files` key, as org.torchhost.image_folder does); prepare the inputs yourself and call "
                  "run_tensors.",
                  Kind::Setup);
    // The evaluation table with `files`, as `host predict --images` points the val split at them
    // (host/predict_images.cpp): the same transform, no labels.
    ComponentConfig config{pre.component, "preprocessing", pre.options};
    toml::array files;
    for (const std::string& path : paths) files.push_back(std::filesystem::absolute(path).string());
    config.options.insert_or_assign("files", std::move(files));
    validate_component(config, entry.info->schema, state().source);
    detail::lower_decode_limit(config, state().max_image_pixels);
    const DatasetProxy data(entry, config, "val");
    detail::ReadSamples read = detail::read_samples(data);
    // The images that could not be read: left out and listed (skip_bad_images, as host predict's
    // data.on_bad_sample = "skip"), or the first in the list fails the call.
    std::vector<FailedImage> failed;
    std::vector<NamedTensors> samples;
    std::vector<int64_t> rows;
    for (std::size_t i = 0; i < read.failures.size(); ++i) {
      if (!read.failures[i]) {
        samples.push_back(std::move(read.samples[i]));
        rows.push_back(static_cast<int64_t>(i));
      } else if (!state().skip_bad_images) {
        // The image's own fault, whatever the dataset's status said, unless memory ran out.
        const std::string text = "tp::infer: " + detail::library_decode_advice(exception_text(read.failures[i]));
        throw Error(text, detail::names_allocation_failure(text) ? Kind::OutOfMemory : Kind::BadInput);
      } else {
        failed.push_back({static_cast<int64_t>(i), "image " + std::to_string(i) + " ('" + paths[i] + "'): " +
                                                       detail::library_decode_advice(exception_text(read.failures[i]))});
      }
    }
    if (samples.empty())
      throw Error("tp::infer: none of the " + std::to_string(paths.size()) + " images could be read; the first: " +
                  failed.front().message,
                  Kind::BadInput);
    CollateOptions collate_options;
    collate_options.layout = &data.batch_layout();
    const NamedTensors inputs = collate(std::move(samples), collate_options);
    Batch batch = detail::answer(*state().model, *state().placement, inputs, &data.batch_layout(), top_k,
                                 state().classes, state().sigmoid_scores);
    batch.rows = std::move(rows);
    batch.failed = std::move(failed);
    return batch;
  });
}

Batch Model::run_encoded(const std::vector<std::vector<unsigned char>>& images, int top_k) {
  return guarded(kFromFiles, [&] { return encoded(images, top_k); });
}

Batch Model::encoded(const std::vector<std::vector<unsigned char>>& images, int top_k) {
  const State::Flight flight(state()); // a moved-from or closing Model refuses before any file is written
  if (images.empty()) throw Error("tp::infer: run_encoded was given no image; give one or more.", Kind::BadInput);
  for (std::size_t i = 0; i < images.size(); ++i)
    if (images[i].size() > TP_INFER_MAX_ENCODED_BYTES)
      throw Error("tp::infer: encoded image " + std::to_string(i) + " holds " + std::to_string(images[i].size()) +
                      " bytes, more than the 1 GiB an image may hold; pass the image file's bytes.",
                  Kind::BadInput);
  const detail::PrivateDirectory dir;
  std::vector<std::string> paths;
  for (std::size_t i = 0; i < images.size(); ++i) {
    const std::string path = (dir.path() / ("image_" + std::to_string(i))).string();
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(images[i].data()), static_cast<std::streamsize>(images[i].size()));
    if (!out.flush())
      throw Error("tp::infer: cannot write encoded image " + std::to_string(i) + " to " + path +
                  " (disk full?); free space in TMPDIR or pass the images as files.",
                  Kind::Setup);
    paths.push_back(path);
  }
  // The temporary names mean nothing to the caller: name each image by its position instead.
  const auto by_position = [&](std::string message) {
    for (std::size_t i = paths.size(); i-- > 0;)
      for (std::size_t at = message.find(paths[i]); at != std::string::npos; at = message.find(paths[i]))
        message.replace(at, paths[i].size(), "encoded image " + std::to_string(i));
    return message;
  };
  try {
    Batch batch = run_files(paths, top_k);
    for (FailedImage& image : batch.failed) image.message = by_position(std::move(image.message));
    return batch;
  } catch (const Error& e) {
    throw Error(by_position(e.what()), e.kind());
  }
}

Batch Model::run_tensors(const std::vector<Tensor>& inputs, int top_k) {
  return guarded(kFromTensors, [&] {
    const State::Flight flight(state());
    if (inputs.empty())
      throw Error("tp::infer: run_tensors was given no tensor; give one per model input field.", Kind::BadInput);
    detail::check_input_names(inputs, state().inputs);
    NamedTensors batch;
    for (const Tensor& input : inputs) {
      const int64_t count = std::accumulate(input.shape.begin(), input.shape.end(), int64_t{1}, std::multiplies<>());
      if (input.shape.empty() || count != static_cast<int64_t>(input.values.size()))
        throw Error("tp::infer: input '" + input.name + "' has " + std::to_string(input.values.size()) +
                    " values for the shape " + c10::str(c10::IntArrayRef(input.shape)) +
                    "; give one value per element, batch dimension first.",
                    Kind::BadInput);
      if (input.shape[0] != inputs.front().shape[0])
        throw Error("tp::infer: input '" + input.name + "' holds " + std::to_string(input.shape[0]) +
                    " samples and '" + inputs.front().name + "' " + std::to_string(inputs.front().shape[0]) +
                    "; every input must have the same batch size.",
                    Kind::BadInput);
      at::Tensor tensor = at::empty(input.shape, at::kFloat);
      std::copy(input.values.begin(), input.values.end(), tensor.data_ptr<float>());
      batch.emplace_back(input.name, std::move(tensor));
    }
    const std::lock_guard<std::mutex> turn(state().share.calls());
    use_threads(state().share, state().threads);
    return detail::answer(*state().model, *state().placement, batch, nullptr, top_k, state().classes,
                          state().sigmoid_scores);
  });
}

}  // namespace tp::infer
