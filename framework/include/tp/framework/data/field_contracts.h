// What a loss expects of its target fields' values (plugin ABI 1.9, tp_field_contract_t), and
// the check that holds samples and batches to it before training: boxes given as (x, y, w, h)
// where the loss takes (x1, y1, x2, y2), negative or out-of-range class ids. Such data trains
// without an error and wastes the run (val/map 0.007 after 100 steps where correct boxes give
// 0.39), so `host plugins check --config`, `host verify` and the first training batch look.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tp/framework/data/named_tensors.h"

namespace tp {

/// One target field's contract, as the loss declared it.
struct FieldContract {
  enum class Kind {
    kBoxesXyxy, ///< floating rows of 4: (x1, y1, x2, y2), finite, x2 > x1 and y2 > y1
    kClassIds   ///< integers in [0, class_count), or >= 0 when class_count is 0
  };
  Kind kind = Kind::kBoxesXyxy;
  std::string field;
  int64_t class_count = 0;
};

/// What a loss declares about itself (tp_loss_v1_t::describe), copied out of the plugin; empty
/// for a loss that declares nothing.
struct LossDescription {
  std::vector<FieldContract> contracts;
  std::vector<std::string> floored_terms; ///< named terms with a floor above zero (verify's overfit check)
  double overfit_fraction = 0.0;          ///< verify's overfit target for the rest; 0 = the host's
};

/// Tallies, over the samples or batches given to it, the values that break each contract, and
/// says what is wrong in one paragraph per broken contract.
class FieldContractCheck {
 public:
  /// `loss_id` names the loss in the messages.
  FieldContractCheck(std::string loss_id, std::vector<FieldContract> contracts);

  /// Checks one sample's fields (`batch` false) or one batch's (`batch` true: stacked, padded or
  /// ragged; a ragged field's "<field>_offsets" places each bad row in its sample of the batch,
  /// a stacked field's first dimension counts the samples). `where` names it: "train sample 12",
  /// "the first training batch". A field the contract names but `fields` lacks is a problem of
  /// its own (a field the loss would not find).
  void add(const NamedTensors& fields, const std::string& where, bool batch = false);

  /// One paragraph per contract that something broke: how many values of how many, in how many of
  /// the checked samples or batches, the first one's place and values, and what to do. Empty when
  /// everything held.
  std::vector<std::string> problems() const;

  bool empty() const noexcept { return contracts_.empty(); }

 private:
  /// What one contract met so far.
  struct Tally {
    int64_t bad = 0, total = 0;     ///< rows (boxes) or values (class ids)
    int64_t bad_units = 0, units = 0; ///< samples with a bad value, and all samples checked
    std::string first;              ///< the first bad value's place and value
    std::vector<std::string> misfits; ///< where the field was absent or of another dtype or shape
  };
  /// Adds `bad` (one flag per row or value) to `tally`: the samples it hits and the count. Returns
  /// the first bad row's index when it is the first `tally` has to describe, else -1.
  static int64_t count_bad(const at::Tensor& bad, const std::vector<int64_t>& offsets, int64_t batch_size,
                           Tally& tally);
  static void add_boxes(const at::Tensor& field, const std::vector<int64_t>& offsets, int64_t batch_size,
                        const std::string& where, Tally& tally);
  static void add_class_ids(const FieldContract& contract, const at::Tensor& field,
                            const std::vector<int64_t>& offsets, int64_t batch_size, const std::string& where,
                            Tally& tally);

  std::string loss_id_;
  std::vector<FieldContract> contracts_;
  std::vector<Tally> tallies_;
};

/// Holds `batch`, a run's first training batch, to the contracts of the loss `loss_id` describes;
/// throws ConfigError (key data.train) with every broken contract's paragraph. Does nothing for a
/// loss that declares none.
void check_first_batch(const std::string& loss_id, const LossDescription& description, const NamedTensors& batch);

}  // namespace tp
