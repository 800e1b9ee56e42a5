// org.torchhost.weighted_sum: a weighted sum of loss terms over several (output, target) pairs,
// e.g. classification plus box regression for a multi-head model, a segmentation model's main
// and auxiliary logits against one mask (items = "labelled"), or cross entropy plus Dice (smp's
// and mmseg's usual recipe).
#include "loss_terms.h"

#include <vector>

namespace tp::losses {
namespace {

constexpr const char* kId = "org.torchhost.weighted_sum";

struct WeightedTerm {
  Term term;
  std::string output;
  std::string target;
  double weight;
};

/// What a weighted sum counts as its items.
enum class Items {
  /// Samples: every term is a per-sample loss over the same batch, so the count is the batch size
  /// and the host's division gives Σ_k w_k · mean_k.
  kSamples,
  /// The labelled positions of one shared target: every term is a cross entropy over the positions
  /// whose label is not ignore_index (or a Dice term, below), so the host's division gives
  /// Σ_k w_k · (term k's mean over them), torchvision's segmentation loss `ce(out) + 0.5 ce(aux)`.
  kLabelled,
};

/// smp's DiceLoss as a weighted_sum term: mode "multiclass" (softmax over C), "binary" for one
/// channel, from logits, smooth 0, eps 1e-7, the shared ignore_index.
at::Tensor dice_term(const at::Tensor& out, const at::Tensor& tgt, const TermOptions& options, const WeightedTerm& t,
                     bool check_ids) {
  DiceOptions dice;
  dice.mode = out.dim() >= 2 && out.size(1) == 1 ? DiceOptions::Mode::kBinary : DiceOptions::Mode::kMulticlass;
  dice.ignore_index = options.ignore_index;
  return dice_loss(out, tgt, dice, kId, t.output, t.target, check_ids);
}

/// Σ_k w_k · (sum over the items of term k), with the count of `Items`. A Dice term is one value
/// for the batch, not a sum over items: it adds its value times the count, so one batch's sum /
/// count is Σ_k w_k · mean_k with the Dice term's mean its value.
class WeightedSum : public Loss {
 public:
  WeightedSum(std::vector<WeightedTerm> terms, TermOptions options, Items items)
      : terms_(std::move(terms)), options_(options), items_(items), ids_(terms_.size()) {
    // Term names for the history (train/loss/<name>): the output each term reads, numbered when
    // two terms read the same output.
    for (std::size_t k = 0; k < terms_.size(); ++k) {
      std::string name = terms_[k].output;
      for (std::size_t j = 0; j < terms_.size(); ++j)
        if (j != k && terms_[j].output == name) name += "_" + std::to_string(k);
      names_.push_back(std::move(name));
    }
  }

  std::vector<tp::cpp::LossTerm> terms() const override {
    std::vector<tp::cpp::LossTerm> out;
    for (std::size_t k = 0; k < last_.size(); ++k) out.push_back({names_[k].c_str(), last_[k]});
    return out;
  }

  tp::cpp::LossSum forward(const tp::cpp::Fields& outputs, const tp::cpp::Fields& targets) override {
    if (items_ == Items::kLabelled) return labelled_forward(outputs, targets);
    at::Tensor total;
    last_.clear();
    int64_t batch = -1;
    at::Device device(at::kCPU);
    for (std::size_t k = 0; k < terms_.size(); ++k) {
      const WeightedTerm& t = terms_[k];
      const at::Tensor& out = outputs.get(t.output);
      const at::Tensor& tgt = targets.get(t.target);
      if (out.dim() == 0)
        throw tp::cpp::Failure(TP_ERR_INVALID_ARGUMENT, std::string(kId) + ": output '" + t.output + "' has no batch dimension");
      if (batch < 0) {
        batch = out.size(0);
        device = out.device();
      } else if (out.size(0) != batch) {
        throw tp::cpp::Failure(TP_ERR_INVALID_ARGUMENT, std::string(kId) + ": output '" + t.output + "' has batch size " +
                                                           std::to_string(out.size(0)) + ", the first output " +
                                                           std::to_string(batch));
      }
      const bool check_ids = (t.term == Term::kCrossEntropy || t.term == Term::kDice) && ids_[k].due(tgt);
      at::Tensor term = t.term == Term::kDice
                            ? dice_term(out, tgt, options_, t, check_ids).mul(static_cast<double>(batch) * t.weight)
                            : per_sample_sum(t.term, out, tgt, options_, t.output, t.target, check_ids).mul(t.weight);
      last_.push_back(term.detach());
      total = total.defined() ? total.add(term) : term;
    }
    return {std::move(total), count_tensor(batch, device)};
  }

 private:
  /// Items::kLabelled: every term reads the same target (checked at create), so every term counts
  /// the same labelled positions and the first cross entropy's count is the count of all; a Dice
  /// term adds its batch value times that count.
  tp::cpp::LossSum labelled_forward(const tp::cpp::Fields& outputs, const tp::cpp::Fields& targets) {
    at::Tensor count;
    std::vector<at::Tensor> weighted(terms_.size());
    for (std::size_t k = 0; k < terms_.size(); ++k) {
      const WeightedTerm& t = terms_[k];
      if (t.term == Term::kDice) continue;
      const at::Tensor& tgt = targets.get(t.target);
      tp::cpp::LossSum term = labelled_cross_entropy(outputs.get(t.output), tgt, options_, t.output, t.target, ids_[k].due(tgt));
      weighted[k] = term.sum.mul(t.weight);
      if (!count.defined()) count = std::move(term.count);
    }
    for (std::size_t k = 0; k < terms_.size(); ++k) {
      const WeightedTerm& t = terms_[k];
      if (t.term != Term::kDice) continue;
      const at::Tensor& tgt = targets.get(t.target);
      const at::Tensor value = dice_term(outputs.get(t.output), tgt, options_, t, ids_[k].due(tgt));
      if (!count.defined()) count = tgt.ne(options_.ignore_index).sum();  // Dice terms alone
      weighted[k] = value.mul(count.to(value.scalar_type())).mul(t.weight);
    }
    at::Tensor total;
    last_.clear();
    for (at::Tensor& w : weighted) {
      last_.push_back(w.detach());
      total = total.defined() ? total.add(w) : w;
    }
    return {std::move(total), std::move(count)};
  }

  std::vector<WeightedTerm> terms_;
  TermOptions options_;
  Items items_;
  std::vector<std::string> names_;  ///< one per term, valid until destruction (the ABI's term names)
  std::vector<at::Tensor> last_;    ///< the last forward's weighted term sums, detached
  std::vector<ClassIdCheck> ids_;   ///< one per term: each term's logits have their own class count
};

const tp_config_key_t kKeys[] = {
    tp::cpp::config_key("losses", TP_CFG_STRING_ARRAY, "[\"cross_entropy\", \"smooth_l1\"]",
                        "terms: cross_entropy, mse, smooth_l1 or dice (smp's DiceLoss, multiclass; binary for one channel)"),
    tp::cpp::config_key("outputs", TP_CFG_STRING_ARRAY, "[\"logits\", \"bbox\"]", "model output of each term"),
    tp::cpp::config_key("targets", TP_CFG_STRING_ARRAY, "[\"label\", \"bbox\"]", "batch field of each term"),
    tp::cpp::config_key("weights", TP_CFG_FLOAT_ARRAY, "[1.0, 1.0]", "weight of each term"),
    tp::cpp::config_key("label_smoothing", TP_CFG_FLOAT, "0.0", "label smoothing of the cross_entropy terms"),
    tp::cpp::config_key("beta", TP_CFG_FLOAT, "1.0", "beta of the smooth_l1 terms (> 0)"),
    tp::cpp::config_key("ignore_index", TP_CFG_INT, "-100",
                        "class-index label the cross_entropy and dice terms ignore (255 for masks)"),
    tp::cpp::config_key("items", TP_CFG_STRING, "\"samples\"",
                        "what the count counts: \"samples\", or \"labelled\" (positions not ignored; cross_entropy and dice "
                        "terms, one target)"),
};
const tp_example_input_t kExamples[] = {
    {sizeof(tp_example_input_t), "label", TP_DTYPE_INT64, 0, {}, 3},
    {sizeof(tp_example_input_t), "bbox", TP_DTYPE_FLOAT32, 1, {4}, 0},
};

/// The `items` key; "labelled" needs cross_entropy (or dice) terms that all read one target, since
/// the count it returns is that target's labelled positions.
Items items_from_config(const tp::cpp::ConfigReader& cfg, const std::vector<WeightedTerm>& terms) {
  const std::string items = cfg.get_string("items");
  if (items == "samples") return Items::kSamples;
  if (items != "labelled")
    throw tp::cpp::Failure(TP_ERR_CONFIG, std::string(kId) + ": items must be \"samples\" or \"labelled\", got \"" + items + "\"");
  for (const WeightedTerm& t : terms) {
    if (t.term != Term::kCrossEntropy && t.term != Term::kDice)
      throw tp::cpp::Failure(TP_ERR_CONFIG, std::string(kId) + ": items = \"labelled\" counts labelled positions, so every "
                                                               "term must be cross_entropy or dice (output '" + t.output +
                                                               "' is not)");
    if (t.target != terms.front().target)
      throw tp::cpp::Failure(TP_ERR_CONFIG, std::string(kId) + ": items = \"labelled\" needs every term to read one target "
                                                               "(its labelled positions are the count), got '" +
                                                               terms.front().target + "' and '" + t.target + "'");
  }
  return Items::kLabelled;
}

}  // namespace

std::unique_ptr<Loss> make_weighted_sum(const tp::cpp::ConfigReader& cfg) {
  const std::vector<std::string> losses = cfg.get_string_array("losses");
  const std::vector<std::string> outputs = cfg.get_string_array("outputs");
  const std::vector<std::string> targets = cfg.get_string_array("targets");
  const std::vector<double> weights = cfg.get_float_array("weights");
  if (losses.empty() || outputs.size() != losses.size() || targets.size() != losses.size() ||
      weights.size() != losses.size())
    throw tp::cpp::Failure(TP_ERR_CONFIG,
                           std::string(kId) + ": losses, outputs, targets and weights must be non-empty and of equal "
                                              "length, got " + std::to_string(losses.size()) + ", " +
                               std::to_string(outputs.size()) + ", " + std::to_string(targets.size()) + ", " +
                               std::to_string(weights.size()));
  TermOptions options;
  options.label_smoothing = cfg.get_float("label_smoothing");
  options.beta = cfg.get_float("beta");
  options.ignore_index = cfg.get_int("ignore_index");
  if (!(options.label_smoothing >= 0.0 && options.label_smoothing <= 1.0) || !(options.beta > 0.0))
    throw tp::cpp::Failure(TP_ERR_CONFIG, std::string(kId) + ": label_smoothing must be in [0, 1] and beta positive");
  std::vector<WeightedTerm> terms;
  for (size_t i = 0; i < losses.size(); ++i)
    terms.push_back({term_from_name(losses[i], kId), outputs[i], targets[i], weights[i]});
  return std::make_unique<WeightedSum>(std::move(terms), options, items_from_config(cfg, terms));
}

const tp_descriptor_t kWeightedSumDescriptor = tp::cpp::loss_descriptor(
    kId, "1.0.0",
    "weighted sum of loss terms over several outputs; count = batch size, or the labelled positions (items = \"labelled\")",
    kKeys, kExamples);

}  // namespace tp::losses
