// mix: org.torchhost.mixup, org.torchhost.cutmix and org.torchhost.mixup_cutmix, three
// "tp.batch_transform/1" components over one class. Pairs are the batch rolled by one (sample i
// with sample i-1, as torchvision v2 MixUp/CutMix), integer labels become one-hot probabilities
// before the blend, and every random draw comes from the host's per-call seed (mix_params.h).
#include <ATen/ops/zeros.h>
#include <c10/util/StringUtil.h>

#include <string>

#include "mix_params.h"
#include "tp/cpp/batch_transform_adapter.h"

namespace tp::mix {
namespace {

using tp::cpp::Failure;

/// One instance: the policy, the two fields it rewrites and the class count of integer labels.
class MixTransform {
 public:
  MixTransform(const char* name, MixPolicy policy, const tp::cpp::ConfigReader& cfg)
      : name_(name), policy_(policy), input_(cfg.get_string("input")), target_(cfg.get_string("target")),
        num_classes_(cfg.get_int_in("num_classes", 1, int64_t{1} << 31)) {}

  tp::cpp::Outputs apply(uint64_t seed, const tp::cpp::Inputs& batch) const {
    const at::Tensor& images = batch.get(input_);
    const at::Tensor& labels = batch.get(target_);
    check_fields(images, labels);
    const MixParams p = draw_mix_params(seed, policy_, images.size(-2), images.size(-1));
    // Labels are probabilities on every batch, mixed or not, so the loss sees one shape and dtype.
    const at::Tensor probabilities = as_probabilities(labels);
    if (!p.applied) return {{target_.c_str(), probabilities}};
    // The same operations, in the same order, as torchvision v2 (_augment.py): bitwise equal.
    at::Tensor mixed_labels = probabilities.roll(1, 0).mul_(1.0 - p.lam).add_(probabilities.mul(p.lam));
    at::Tensor mixed_images;
    if (p.cutmix) {
      mixed_images = images.clone();
      const at::Tensor rolled = images.roll(1, 0);
      mixed_images.slice(-2, p.y1, p.y2).slice(-1, p.x1, p.x2).copy_(rolled.slice(-2, p.y1, p.y2).slice(-1, p.x1, p.x2));
    } else {
      mixed_images = images.roll(1, 0).mul_(1.0 - p.lam).add_(images.mul(p.lam));
    }
    return {{input_.c_str(), std::move(mixed_images)}, {target_.c_str(), std::move(mixed_labels)}};
  }

 private:
  void check_fields(const at::Tensor& images, const at::Tensor& labels) const {
    const bool index_labels = labels.dim() == 1 && !labels.is_floating_point();
    const bool probability_labels = labels.dim() == 2 && labels.is_floating_point() && labels.size(1) == num_classes_;
    if (images.dim() < 3 || labels.size(0) != images.size(0) || !(index_labels || probability_labels))
      throw Failure(TP_ERR_INVALID_ARGUMENT,
                    name_ + ": expected images '" + input_ + "' [B, ..., H, W] and labels '" + target_ +
                        "' as class indices [B] or probabilities [B, " + std::to_string(num_classes_) + "], got " +
                        c10::str(images.sizes()) + " and " + c10::str(labels.sizes()) + " " +
                        std::string(c10::toString(labels.scalar_type())));
    if (policy_.mixup_alpha > 0.0 && !images.is_floating_point())
      throw Failure(TP_ERR_INVALID_ARGUMENT, name_ + ": mixup blends images '" + input_ + "', which must be "
                                                "floating point, got " + std::string(c10::toString(images.scalar_type())));
  }

  /// One-hot float32 for class indices (scatter: no device sync; an index out of range fails on
  /// the device); probabilities unchanged.
  at::Tensor as_probabilities(const at::Tensor& labels) const {
    if (labels.is_floating_point()) return labels;
    return at::zeros({labels.size(0), num_classes_}, labels.options().dtype(at::kFloat))
        .scatter_(1, labels.to(at::kLong).unsqueeze(1), 1.0);
  }

  std::string name_;
  MixPolicy policy_;
  std::string input_;
  std::string target_;
  int64_t num_classes_;
};

constexpr double kMaxAlpha = 1e6;

double positive_alpha(const tp::cpp::ConfigReader& cfg, const char* component, const char* key) {
  const double alpha = cfg.get_float_in(key, 0.0, kMaxAlpha);
  if (!(alpha > 0.0))
    throw Failure(TP_ERR_CONFIG, std::string(component) + ": " + key + " must be > 0 (the Beta(alpha, alpha) of lambda), got " +
                                     std::to_string(alpha));
  return alpha;
}

std::shared_ptr<MixTransform> make_mixup(const tp::cpp::ConfigReader& cfg) {
  MixPolicy policy;
  policy.mixup_alpha = positive_alpha(cfg, "mixup", "alpha");
  return std::make_shared<MixTransform>("mixup", policy, cfg);
}

std::shared_ptr<MixTransform> make_cutmix(const tp::cpp::ConfigReader& cfg) {
  MixPolicy policy;
  policy.cutmix_alpha = positive_alpha(cfg, "cutmix", "alpha");
  return std::make_shared<MixTransform>("cutmix", policy, cfg);
}

std::shared_ptr<MixTransform> make_mixup_cutmix(const tp::cpp::ConfigReader& cfg) {
  MixPolicy policy;
  policy.mixup_alpha = cfg.get_float_in("mixup_alpha", 0.0, kMaxAlpha);
  policy.cutmix_alpha = cfg.get_float_in("cutmix_alpha", 0.0, kMaxAlpha);
  policy.switch_prob = cfg.get_float_in("switch_prob", 0.0, 1.0);
  policy.prob = cfg.get_float_in("prob", 0.0, 1.0);
  if (policy.mixup_alpha == 0.0 && policy.cutmix_alpha == 0.0)
    throw Failure(TP_ERR_CONFIG, "mixup_cutmix: mixup_alpha and cutmix_alpha are both 0, so nothing would be mixed; "
                                 "set one of them > 0 (timm's defaults: mixup_alpha = 0.8, cutmix_alpha = 1.0)");
  return std::make_shared<MixTransform>("mixup_cutmix", policy, cfg);
}

#define TP_MIX_FIELD_KEYS                                                                                          \
  tp::cpp::config_key("num_classes", TP_CFG_INT, nullptr,                                                         \
                      "number of classes C: integer labels become one-hot [B, C]"),                              \
      tp::cpp::config_key("input", TP_CFG_STRING, "\"image\"", "batch field with the images [B, C, H, W] (floating)"), \
      tp::cpp::config_key("target", TP_CFG_STRING, "\"label\"",                                                      \
                          "batch field with class indices [B] or probabilities [B, C]")
const tp_config_key_t kMixupKeys[] = {
    tp::cpp::config_key("alpha", TP_CFG_FLOAT, "1.0", "lambda ~ Beta(alpha, alpha); > 0"),
    TP_MIX_FIELD_KEYS,
};
const tp_config_key_t kCutmixKeys[] = {
    tp::cpp::config_key("alpha", TP_CFG_FLOAT, "1.0", "lambda ~ Beta(alpha, alpha) sets the box area; > 0"),
    TP_MIX_FIELD_KEYS,
};
const tp_config_key_t kMixupCutmixKeys[] = {
    tp::cpp::config_key("mixup_alpha", TP_CFG_FLOAT, "0.8", "Mixup's Beta(alpha, alpha); 0 = never Mixup"),
    tp::cpp::config_key("cutmix_alpha", TP_CFG_FLOAT, "1.0", "CutMix's Beta(alpha, alpha); 0 = never CutMix"),
    tp::cpp::config_key("switch_prob", TP_CFG_FLOAT, "0.5", "probability of CutMix when both alphas are > 0"),
    tp::cpp::config_key("prob", TP_CFG_FLOAT, "1.0", "probability that a batch is mixed at all"),
    TP_MIX_FIELD_KEYS,
};
#undef TP_MIX_FIELD_KEYS
// For `host plugins check --set num_classes=3`: a batch of 3-channel 8x8 images and labels in [0, 3).
const tp_example_input_t kExamples[] = {
    {sizeof(tp_example_input_t), "image", TP_DTYPE_FLOAT32, 3, {3, 8, 8}, 0},
    {sizeof(tp_example_input_t), "label", TP_DTYPE_INT64, 0, {}, 3},
};

const tp_descriptor_t kMixupDescriptor = tp::cpp::batch_transform_descriptor(
    "org.torchhost.mixup", "1.0.0", "Mixup: blends each image and label with the previous sample's", kMixupKeys,
    kExamples);
const tp_descriptor_t kCutmixDescriptor = tp::cpp::batch_transform_descriptor(
    "org.torchhost.cutmix", "1.0.0", "CutMix: pastes a box of the previous sample; labels by area", kCutmixKeys,
    kExamples);
const tp_descriptor_t kMixupCutmixDescriptor = tp::cpp::batch_transform_descriptor(
    "org.torchhost.mixup_cutmix", "1.0.0", "timm's Mixup/CutMix switch, applied with probability prob",
    kMixupCutmixKeys, kExamples);

const tp::cpp::Component kComponents[] = {
    tp::cpp::batch_transform_component<MixTransform, kMixupDescriptor, &make_mixup>(),
    tp::cpp::batch_transform_component<MixTransform, kCutmixDescriptor, &make_cutmix>(),
    tp::cpp::batch_transform_component<MixTransform, kMixupCutmixDescriptor, &make_mixup_cutmix>(),
};

}  // namespace
}  // namespace tp::mix

TP_DEFINE_PLUGIN("mix", TP_TORCH_BUILD_INFO_INIT, tp::mix::kComponents)
