// The checks at the plugin boundary that keep a plugin's claims from becoming out-of-bounds
// accesses in the host or another plugin (docs/hardening.md): a dataset field's DLPack
// description (dlpack_check.h, shared by `host plugins check` and training) and a model's ragged
// outputs (ragged_outputs.h, before any loss, metric or prediction writer reads an offset).
#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "dlpack_check.h"
#include "ragged_outputs.h"
#include "tp/framework/error.h"

#include "support/doctest_after_torch.h"

namespace {

using tp::detail::check_ragged_outputs;
using tp::detail::dlpack_problem;

/// A float32 [2, 3] CPU field over `storage`.
struct FieldOfSix {
  float storage[6] = {};
  int64_t shape[2] = {2, 3};
  int64_t strides[2] = {3, 1};
  DLTensor t{};
  FieldOfSix() {
    t.data = storage;
    t.device = {kDLCPU, 0};
    t.ndim = 2;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape;
  }
};

/// The message check_ragged_outputs throws for `outputs` of a batch of `batch_size` (-1: not
/// known), "" when it accepts them.
std::string ragged_refusal(const tp::NamedTensors& outputs, int64_t batch_size = -1) {
  try {
    check_ragged_outputs(outputs, batch_size, "org.test.m", "the model component 'org.test.m'");
  } catch (const tp::PluginError& e) {
    return e.what();
  }
  return "";
}

at::Tensor offsets(std::initializer_list<int64_t> values) { return at::tensor(values, at::kLong); }

}  // namespace

TEST_CASE("dlpack_problem: a valid field passes; every lie about its layout is named") {
  FieldOfSix f;
  CHECK(dlpack_problem(f.t) == "");
  f.t.strides = f.strides;
  CHECK(dlpack_problem(f.t) == "");
  f.t.ndim = -1; // the issue's field: at::fromDLPack crashed on it in training
  CHECK(dlpack_problem(f.t).find("has ndim -1") != std::string::npos);
  f.t.ndim = 33;
  CHECK(dlpack_problem(f.t).find("has ndim 33") != std::string::npos);
  f.t.ndim = 2;
  f.t.shape = nullptr;
  CHECK(dlpack_problem(f.t).find("NULL shape") != std::string::npos);
  f.t.shape = f.shape;
  f.shape[1] = -3;
  CHECK(dlpack_problem(f.t).find("negative size -3 in dimension 1") != std::string::npos);
  f.shape[1] = int64_t{1} << 40;
  f.shape[0] = int64_t{1} << 40;
  CHECK(dlpack_problem(f.t).find("more than 2^62 elements") != std::string::npos);
  f.shape[0] = 2;
  f.shape[1] = 3;
  f.strides[0] = int64_t{1} << 61;
  CHECK(dlpack_problem(f.t).find("strides that reach past") == std::string::npos); // 2^61 * 1 fits
  f.strides[1] = int64_t{1} << 61;
  CHECK(dlpack_problem(f.t).find("strides that reach past 2^62 elements in dimension 1") != std::string::npos);
  f.strides[0] = 3;
  f.strides[1] = 1;
  f.t.byte_offset = uint64_t{1} << 63;
  CHECK(dlpack_problem(f.t).find("byte offset") != std::string::npos);
  f.t.byte_offset = 0;
  f.t.dtype.lanes = 4;
  CHECK(dlpack_problem(f.t).find("4 lanes") != std::string::npos);
  f.t.dtype = {kDLFloat, 12, 1};
  CHECK(dlpack_problem(f.t).find("12 bits") != std::string::npos);
  f.t.dtype = {kDLFloat, 32, 1};
  f.t.device = {kDLCUDA, 0};
  CHECK(dlpack_problem(f.t).find("not a CPU tensor") != std::string::npos);
  f.t.device = {kDLCPU, 0};
  f.t.data = nullptr;
  CHECK(dlpack_problem(f.t).find("NULL data pointer and 6 elements") != std::string::npos);
  f.shape[0] = 0; // no element: a NULL pointer reads nothing
  CHECK(dlpack_problem(f.t) == "");
}

TEST_CASE("check_ragged_outputs: offsets that start at 0, never decrease and end at the rows pass") {
  const at::Tensor boxes = at::zeros({5, 4});
  CHECK(ragged_refusal({{"boxes", boxes}, {"boxes_offsets", offsets({0, 2, 2, 5})}}) == "");
  CHECK(ragged_refusal({{"boxes", at::zeros({0, 4})}, {"boxes_offsets", offsets({0, 0, 0})}}) == "");
  // An `_offsets` output without its rows, or a name that is only the suffix, is not a ragged pair.
  CHECK(ragged_refusal({{"other_offsets", offsets({7})}, {"_offsets", offsets({3})}}) == "");
  // One offsets tensor shared by several outputs (FCOS) is read once and checked for each.
  const at::Tensor shared = offsets({0, 1, 5});
  CHECK(ragged_refusal({{"boxes", boxes}, {"boxes_offsets", shared}, {"scores", at::zeros({5})},
                        {"scores_offsets", shared}}) == "");
  CHECK(ragged_refusal({{"boxes", boxes}, {"boxes_offsets", shared}, {"scores", at::zeros({4})},
                        {"scores_offsets", shared}})
            .find("'scores_offsets' ends at 5 where the output has 4 rows") != std::string::npos);
}

TEST_CASE("check_ragged_outputs: every hostile offsets tensor is refused, naming the model and the field") {
  const at::Tensor boxes = at::zeros({3, 4});
  const auto refusal = [&](const at::Tensor& o) { return ragged_refusal({{"boxes", boxes}, {"boxes_offsets", o}}); };
  // The issue's offsets: 2,000 rows of a 3-row output (a heap overflow in coco_map, heap bytes
  // written by the jsonl writer).
  const std::string issue = refusal(offsets({0, 2000, 3, 3, 3}));
  CHECK(issue.find("the model component 'org.test.m'") != std::string::npos);
  CHECK(issue.find("'boxes_offsets' decreases from 2000 to 3 at entry 2") != std::string::npos);
  CHECK(refusal(offsets({1, 3})).find("starts at 1, not 0") != std::string::npos);
  CHECK(refusal(offsets({0, int64_t{1} << 62})).find("ends at 4611686018427387904 where the output has 3 rows") !=
        std::string::npos);
  CHECK(refusal(offsets({0, -1, 3})).find("decreases from 0 to -1") != std::string::npos);
  CHECK(refusal(at::tensor({0, 3}, at::kInt)).find("is Int of 1 dimension(s)") != std::string::npos);
  CHECK(refusal(at::zeros({2, 2}, at::kLong)).find("of 2 dimension(s)") != std::string::npos);
  CHECK(refusal(at::zeros({0}, at::kLong)).find("0 entries") != std::string::npos);
  CHECK(ragged_refusal({{"boxes", at::scalar_tensor(1.0)}, {"boxes_offsets", offsets({0, 1})}}).find("0-dimensional") !=
        std::string::npos);
}

// Issue 58, item 13: offsets of the wrong length, monotone and ending at the row count, passed;
// `host predict --format jsonl` then wrote every sample with no boxes and exited 0.
TEST_CASE("check_ragged_outputs: B + 1 offsets for a batch of B, no more and no fewer") {
  const at::Tensor boxes = at::zeros({3, 4});
  CHECK(ragged_refusal({{"boxes", boxes}, {"boxes_offsets", offsets({0, 1, 1, 3})}}, 3) == "");
  CHECK(ragged_refusal({{"boxes", boxes}, {"boxes_offsets", offsets({0, 3})}}, 3)
            .find("'boxes_offsets' has 2 entries for a batch of 3 samples, not 4") != std::string::npos);
  CHECK(ragged_refusal({{"boxes", boxes}, {"boxes_offsets", offsets({0, 1, 1, 2, 3, 3})}}, 3)
            .find("has 6 entries for a batch of 3 samples") != std::string::npos);
  // The batch size comes from the model's inputs: a ragged input's offsets, else a dense input's rows.
  using tp::detail::batch_size_of;
  CHECK(batch_size_of({{"image", at::zeros({5, 3, 8, 8})}}) == 5);
  CHECK(batch_size_of({{"points", at::zeros({17, 2})}, {"points_offsets", offsets({0, 9, 17})}}) == 2);
  CHECK(batch_size_of({{"points", at::zeros({17, 2})}, {"points_offsets", offsets({0, 9, 17})},
                       {"image", at::zeros({2, 3})}}) == 2);
  CHECK(batch_size_of({{"scale", at::scalar_tensor(2.0)}}) == -1);
  CHECK(batch_size_of({}) == -1);
}

// Issue 58, item 11: a negative stride aborted the host inside LibTorch, a stride past the
// elements made it read beyond the field's buffer (SIGSEGV); both unnamed.
TEST_CASE("dlpack_problem: strides are non-negative and lay the elements out densely") {
  FieldOfSix f;
  f.t.strides = f.strides;
  f.strides[0] = 1;  // column-major [2, 3]: a permutation of compact, accepted
  f.strides[1] = 2;
  CHECK(dlpack_problem(f.t) == "");
  f.strides[0] = -3;
  f.strides[1] = 1;
  CHECK(dlpack_problem(f.t).find("negative stride -3 in dimension 0") != std::string::npos);
  f.strides[0] = 1000;  // the issue's oversized stride: row 1 would be read 4,000 bytes on
  CHECK(dlpack_problem(f.t).find("do not lay its elements out densely (a stride of 1000 where 3 was due)") !=
        std::string::npos);
  f.strides[0] = 1;  // overlapping rows
  f.strides[1] = 1;
  CHECK(dlpack_problem(f.t).find("densely") != std::string::npos);
  f.shape[0] = 1;  // a dimension of size 1 may carry any stride (LibTorch's own views do)
  f.strides[0] = 12345;
  CHECK(dlpack_problem(f.t) == "");
}
