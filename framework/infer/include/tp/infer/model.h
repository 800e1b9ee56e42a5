// A model that `host export` wrote, answering in your own C++ program (docs/deployment.md, "The
// inference library"). The export's metadata names the model component, its options and the
// evaluation preprocessing; the model's own plugin builds the network through the C ABI, as in
// `host predict`, and image files are read by the run's own dataset component with its
// evaluation transform, so a file's inputs are those `host predict --images` feeds the model, bit
// for bit. No training state is loaded: no optimizer, no loss, no metrics.
//
// Linking: libtorchhost_infer.so (CMake: find_package(torchhost CONFIG), target torchhost::infer)
// exports the classes marked TP_EXPORT here and the C API of infer.h, nothing else; it needs no
// LibTorch headers, only LibTorch's libraries at run time (found by its RUNPATH).
//
// Errors: every function here throws tp::infer::Error (one paragraph: what failed and what to
// do), whose kind() tells the caller's bad input from the deployment's and the library's faults;
// nothing else escapes. Callers that cannot take exceptions use the C API (infer.h).
//
// Threads: Models may be called from several threads at once, and several Models may be open at
// once. Calls take turns across the process (one batch at a time, each with the whole intra-op
// thread pool, as `host` calls its plugins), so concurrent callers get exactly what one caller
// gets. The open Models share the process's plugin libraries (loaded and initialised once,
// unloaded with the last Model); those on CUDA must agree on OpenOptions::tf32 (LibTorch's switch
// is one per process).
//
// Example:
//   tp::infer::OpenOptions options;  // the API is C++17; designated initializers need C++20
//   options.plugin_dirs = {"/opt/torchhost/lib/torchhost/plugins"};
//   tp::infer::Model model = tp::infer::Model::open("flowers.safetensors", options);
//   tp::infer::Batch batch = model.run_files({"a.jpg", "b.jpg"}, /*top_k=*/3);
//   for (const auto& scores : batch.top)  // per image, best first
//     std::printf("%s %.3f\n", scores[0].name.c_str(), scores[0].probability);
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tp/macros.h"

namespace tp::infer {

/// What every failure of this API throws: the message names what failed and what to do, kind()
/// whose fault it is (a server answers "bad request" for BadInput, "unavailable" for the others).
class TP_EXPORT Error : public std::runtime_error {
 public:
  /// Whose fault a failure is. The C API's status says the same (infer.h).
  enum class Kind {
    /// A fault of the library, a plugin or LibTorch that is none of the below (a plugin's call
    /// failing, a device error, a bug): C TP_ERR_INTERNAL.
    Internal = 0,
    /// The call's own input: a bad argument (a count, top_k, a name, a NULL), an image that
    /// cannot be read (corrupt, truncated, missing, not an image), a tensor whose values, shape
    /// or dtype the model refuses, a call on a moved-from or closing model: C TP_ERR_INVALID_ARGUMENT.
    BadInput = 1,
    /// The deployment: the export (missing, unreadable, damaged, of another format), a plugin
    /// missing or refused, the weights not fitting its model, the device, TMPDIR, the log level's
    /// variable, another model's tf32: C TP_ERR_CONFIG.
    Setup = 2,
    /// An allocation failed (LibTorch's allocator, a device's memory, the library's own):
    /// C TP_ERR_OUT_OF_MEMORY. A smaller batch may pass.
    OutOfMemory = 3,
  };
  /// `kind` is Internal unless said: a failure nobody classified is the library's.
  explicit Error(const std::string& message, Kind kind = Kind::Internal);
  explicit Error(const char* message, Kind kind = Kind::Internal);
  /// Whose fault it is.
  Kind kind() const noexcept { return kind_; }
  /// Out of line: the type information a caller's catch compares lives in the library.
  ~Error() override;

 private:
  Kind kind_;
};

/// A dense float32 tensor on the CPU, row-major (C order).
struct Tensor {
  std::string name;           ///< the model's input or output field ("image", "logits")
  std::vector<int64_t> shape; ///< [N, ...]: the batch dimension first
  std::vector<float> values;  ///< product(shape) values; integer outputs converted to float
};

/// One class of a classifier's answer for one image.
struct ClassScore {
  int64_t index = 0;       ///< the class id (the row of the output)
  std::string name;        ///< the export's class name for it; "" when the export names none
  /// softmax of the output row, as `host predict`'s `logits.prob`; the class's own sigmoid for a
  /// model trained with a binary cross entropy (the export's torchhost.scores = "sigmoid":
  /// multi-label, where every class above 0.5 applies)
  float probability = 0.F;
};

/// An image of a run_files or run_encoded call that could not be read, left out of the batch
/// under OpenOptions::skip_bad_images.
struct FailedImage {
  int64_t index = 0;   ///< its position in the call's list
  std::string message; ///< why: "image <index> ('<path>'): <the dataset's reason>"
};

/// The answer for one batch.
struct TP_EXPORT Batch {
  /// Every output the model returned, in its order, each [N, ...] (N = the batch's images).
  /// From files (run_files, run_encoded), a segmenter's per-pixel output (scores [N, C, H, W] or
  /// ids [N, H, W] at the network's input size) comes at each file's size, as `host predict`
  /// writes its maps: H and W are the largest file's, image i's map fills the top-left
  /// `<name>_sizes`[i] = (height, width), 0 beyond it; "<name>_sizes" [N, 2] follows it.
  std::vector<Tensor> outputs;
  /// Per image, the top_k classes of the classification output (`logits` or the first
  /// `*_logits`, floating [N, C]: `host predict`'s rule), best first; empty when there is none.
  /// Names only when the export names exactly C classes (host predict's logits.class rule). Empty
  /// for an image whose scores hold a NaN (host predict's argmax -1 and no class): no class is best.
  std::vector<std::vector<ClassScore>> top;
  /// The position in the call's list (of files, images or, for run_tensors, samples) of each row
  /// of `outputs` and of each entry of `top`: 0, 1, ..., N - 1 unless images were left out.
  std::vector<int64_t> rows;
  /// The images left out under OpenOptions::skip_bad_images, in list order; empty otherwise.
  std::vector<FailedImage> failed;
  /// The output named `name`. Throws Error naming the outputs there are when there is none.
  const Tensor& output(const std::string& name) const;
};

/// How to open a model.
struct OpenOptions {
  /// "cpu", "cuda" or "cuda:N" (a CUDA device needs a CUDA build of LibTorch and the plugins).
  std::string device = "cpu";
  /// Directories holding the plugins the export names (its `torchhost.plugin_files`): the
  /// installed host's lib/torchhost/plugins for the built-in ones, your build directory for yours.
  std::vector<std::string> plugin_dirs;
  /// On a CUDA device: whether convolutions and matrix products may run in TF32. open() sets
  /// LibTorch's process-wide switches (cuDNN's and cuBLAS's) to it. false, as `host predict` with
  /// the default run.tf32 = false, so that the outputs equal host predict's; true is faster on
  /// Ampere and later, about 1e-3 apart. Ignored on the CPU. Models open on CUDA at once must
  /// agree on it: open() refuses the other setting while one is open.
  bool tf32 = false;
  /// LibTorch's intra-op threads for this model's calls (decoding a batch's files and the
  /// forward pass): set on the calling thread when a call begins, as `host predict` runs with
  /// run.threads. 0 means LibTorch's default count (OMP_NUM_THREADS, else one per core), read
  /// once per process when the first model opens and set like any other count, so another
  /// model's count never leaks into it; at most 1023 (open() throws Error for more). Float results
  /// can depend on it in their last bits (docs/deployment.md, "Same batch, same bits"). In a
  /// child forked after the process's first open, every call runs on 1 (docs/deployment.md, "Fork").
  int threads = 0;
  /// run_files and run_encoded: an image that cannot be read (corrupt, truncated, missing, not an
  /// image) is left out of the batch and listed in Batch::failed, the others answered (Batch::rows
  /// says which row is which), as `host predict` with data.on_bad_sample = "skip". false: the
  /// first such image in the list fails the call, an Error naming it. A call none of whose
  /// images can be read throws either way.
  bool skip_bad_images = false;
  /// Whether the export's model may load files outside the export's own directory. An export
  /// names the model component and its options, and an option that names a file (TP_CFG_PATH:
  /// org.torchhost.torchscript's `path`, a TorchScript program) makes the plugin load it: code
  /// this process runs, which may read any file the process can. false: open() refuses such a
  /// file outside the export's directory (after links are resolved), an Error of kind Setup
  /// naming it; a file beside the export is loaded. Either way open() logs each file the model
  /// loads with its SHA-256 (a warning when outside). Set it only for an export you trust: yours,
  /// of a TorchScript model, which names the file the run trained with (docs/deployment.md,
  /// "What an export may run").
  bool allow_files_outside_export = false;
  /// run_files and run_encoded: the most pixels (width x height) an image may declare to be
  /// decoded; a larger one is refused before decoding (as an image that cannot be read: BadInput,
  /// or left out under skip_bad_images), its message naming this option. 0: the export's own
  /// limit, the max_image_pixels of its preprocessing table (torchhost.preprocessing: 178956970,
  /// PIL's, unless the run set it). A value only lowers that limit (one above it keeps the
  /// export's): a service taking uploads bounds what one costs (a 13000 x 13000 PNG of 531 KB
  /// decodes to 507 MB). For datasets that decode images (image_folder, segmentation_folder,
  /// coco_detection); ignored for others. open() throws Error for a negative value.
  int64_t max_image_pixels = 0;
  /// Changes to the options the export's model is built with, each "key=value" as `host predict
  /// --set model.key=value` takes it (a TOML value, else the text as a string; the key and the
  /// value trimmed of spaces); later entries win.
  /// The export keeps the run's evaluation settings, right for scoring and not always for serving:
  /// a detector's `score_thresh = 0.05` answers up to `detections_per_img` boxes per image. Here
  /// a service sets its own ({"score_thresh=0.4", "nms_thresh=0.5", "detections_per_img=20"} for
  /// org.torchhost.fcos), as torchvision's detectors take them at construction. Checked against
  /// the model plugin's options as the export's own are: an unknown key (with the closest one) or
  /// a value of the wrong type is an Error of kind Setup naming the entry; an entry without '=',
  /// a dotted key or `component` one of kind BadInput. An option the weights depend on
  /// (num_classes, a width) fails as weights that do not fit the model. open() logs each change
  /// (info); the log and the messages show a URI's user-info in an entry as "***".
  std::vector<std::string> model_options{};
};

class TP_EXPORT Model {
 public:
  /// Opens the file `host export` wrote: loads the plugins of `options.plugin_dirs` (with the
  /// host's ABI and LibTorch fingerprint checks), builds the model its metadata names with its
  /// options, fills it with the file's weights and puts it in evaluation mode on the device.
  /// Throws Error when the file is no torchhost export (no `torchhost.model`) or declares another
  /// metadata format than 1 (`torchhost.format`; none is read as 1), a plugin is
  /// missing or refused, the weights do not fit the model, the device does not exist, on CUDA
  /// another open CUDA Model runs with the other `tf32`, or (the first Model of the process,
  /// unless set_log was called) TORCHHOST_INFER_LOG_LEVEL holds an unknown level.
  static Model open(const std::string& export_file, const OpenOptions& options);

  /// A moved-from Model holds nothing: every call on it throws Error.
  Model(Model&&) noexcept;
  /// Closes the model held (as the destructor) before taking `other`'s.
  Model& operator=(Model&& other) noexcept;
  /// Closes the model: waits for the calls in flight on it to return, and a call that begins
  /// meanwhile throws Error ("is being closed"). A call begun after it returned uses freed memory.
  ~Model();

  /// [any] Reads `paths` (image files) with the export's evaluation preprocessing (its dataset
  /// component and table, `torchhost.preprocessing`, given the files as `host predict --images`
  /// gives them) and runs them as one batch. `top_k` (>= 0; capped at the class count) classes per
  /// image. Throws Error for an empty list, an unreadable or corrupt file (naming it), or an
  /// export whose dataset cannot read plain files.
  Batch run_files(const std::vector<std::string>& paths, int top_k = 5);

  /// [any] As run_files, for images held in memory (the bytes of a JPEG, PNG, BMP or WebP file).
  /// Each is written to a file of a private temporary directory (mode 0700, removed before
  /// returning) that the dataset reads, so the bytes decode exactly as the same file would.
  /// Messages name the image as "encoded image <i>". An image above 1 GiB
  /// (TP_INFER_MAX_ENCODED_BYTES, infer.h) is refused before anything is written.
  Batch run_encoded(const std::vector<std::vector<unsigned char>>& images, int top_k = 5);

  /// [any] Runs prepared inputs (already decoded and normalised, e.g. [N, 3, H, W] float32),
  /// one tensor per model input field; they must share N. Throws Error (BadInput) for a tensor
  /// whose values do not fill its shape, mismatched batch sizes, two tensors of one name, a name
  /// the model does not read (where its options name its inputs: `input` or `inputs` in the
  /// export's torchhost.model, as the built-in models do), or a shape the model refuses (its message).
  Batch run_tensors(const std::vector<Tensor>& inputs, int top_k = 5);

  /// [any] Changes OpenOptions::skip_bad_images for the calls that begin from now on.
  void set_skip_bad_images(bool skip);

  /// [any] Changes OpenOptions::max_image_pixels for the calls that begin from now on. Throws
  /// Error for a negative count.
  void set_max_image_pixels(int64_t pixels);

  /// [any] Changes OpenOptions::threads for the calls that begin from now on (0: LibTorch's
  /// default count, as there). Throws Error for a negative count or one of 1024 or more.
  void set_threads(int threads);

  /// The export's class names by class id (`torchhost.classes`); empty when it has none.
  const std::vector<std::string>& class_names() const;
  /// The model component's id (`org.torchhost.resnet`).
  const std::string& component() const;
  /// Every entry of the export's metadata (docs/predict.md, "host export"'s key table), by key:
  /// `torchhost.preprocessing` (the evaluation table as JSON: its resize, crop, mean, std and
  /// decode settings, what run_tensors' inputs must be prepared with), `torchhost.model` (the
  /// component and options: the input field's name is its `input` option where it has one),
  /// `torchhost.outputs`, `torchhost.scores`, `torchhost.weights`, `torchhost.epoch`,
  /// `torchhost.version`, ... Values are the file's strings (JSON for the structured entries).
  const std::map<std::string, std::string>& metadata() const;

 private:
  struct State;
  explicit Model(std::unique_ptr<State> state);
  /// The open model's state; throws Error on a moved-from Model.
  State& state() const;
  Batch encoded(const std::vector<std::vector<unsigned char>>& images, int top_k);
  std::unique_ptr<State> state_;
};

/// How much a line of the library's log matters.
enum class LogLevel { Debug = 0, Info = 1, Warning = 2, Error = 3 };

/// Receives one line of the library's log: its level, its source ("tp::infer" for the library's
/// own lines, "plugin <name>" for a plugin's) and its text (one paragraph, at most
/// 16 KiB, no timestamp, no newline at the end: the caller's logger adds its own).
using LogFunction = std::function<void(LogLevel level, const std::string& source, const std::string& message)>;

/// [any] Routes the log of every model of the process, from the next line on, to `function`
/// (empty: stderr, "<time> [<source>] <level>: <text>", the default) and keeps the lines of
/// `least` and above. Lines are handed over one at a time, from whichever thread logs them (a
/// caller's, during its open or run call); `function` must not call this library, and what it
/// throws is dropped (the line then goes to stderr). Once called, TORCHHOST_INFER_LOG_LEVEL is
/// no longer read. Without it the library prints warnings and errors to stderr, or what that
/// variable says (docs/deployment.md, "Log").
TP_EXPORT void set_log(LogFunction function, LogLevel least = LogLevel::Warning);

/// [any] This library's build in one line, as `host --version` prints it over several lines
/// (the compiler left out): "torchhost <git describe>; plugin ABI 1.13 (plugins of ABI 1.0 to
/// 1.13 load); LibTorch 2.13.0", and CUDA's, cuDNN's and NCCL's versions in a CUDA build.
TP_EXPORT std::string version();

}  // namespace tp::infer
