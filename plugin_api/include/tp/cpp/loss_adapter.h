// torchhost C++ helpers for Tier T plugin authors: a loss as a C++ class, and the C shell
// ("tp.loss/1": create/destroy/forward and, when the class has them, the ABI 1.3 named terms)
// generated from it.
//
// The adapter wraps every call in TP_GUARD (PLG-7), hands the sum, the count and the terms over
// only when the call succeeds (PLG-9: on error no handle is handed over) and accepts
// destroy(NULL) (PLG-12).
//
//   class Mse {
//    public:
//     explicit Mse(const tp::cpp::ConfigReader& cfg)                      // [main] throw Failure to refuse
//         : output_(cfg.get_string("output")), target_(cfg.get_string("target")) {}
//     tp::cpp::LossSum forward(const tp::cpp::Fields& outputs, const tp::cpp::Fields& targets) {  // [main]
//       const at::Tensor& y = outputs.get(output_);
//       const at::Tensor per_sample = (y - targets.get(target_)).pow(2).flatten(1).mean(1);
//       return {per_sample.sum(), at::scalar_tensor(y.size(0), y.options().dtype(at::kLong))};  // no device sync
//     }
//    private:
//     std::string output_, target_;
//   };
//   const tp_descriptor_t kDescriptor = tp::cpp::loss_descriptor("org.example.mse", "1.0.0", "mean squared error", kKeys);
//   TP_DEFINE_LOSS_PLUGIN("mse", Mse, kDescriptor)
//
// What the class provides (L below):
//   L(const ConfigReader&)                   or a factory: loss_component<L, kDescriptor, &make>()
//                                            with `std::shared_ptr<L>` (or `std::unique_ptr<L>`)
//                                            `make(const ConfigReader&)`; L may then be an abstract base
//   LossSum forward(const Fields& outputs, const Fields& targets)
//                                            the sum of the item losses (differentiable, 0-dim,
//                                            floating) and their count (0-dim, any numeric dtype),
//                                            both on the outputs' device; never synchronizes (PLG-11)
//   std::vector<LossTerm> terms() const      optional (ABI 1.3): the named parts of the forward just
//                                            made, detached sums adding up to its loss sum; names
//                                            valid until destroy. Without it the table's entry is
//                                            NULL and the host records the total only
//   const LossDescription& description() const
//                                            optional (ABI 1.9): the contracts of the target fields
//                                            (boxes as x1 y1 x2 y2, class ids) that the host checks
//                                            before training, and the named terms with a floor
//                                            (host verify's overfit check); keep the
//                                            LossDescription a member, built in the constructor
#ifndef TP_CPP_LOSS_ADAPTER_H
#define TP_CPP_LOSS_ADAPTER_H

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tp/cpp/adapter.h"
#include "tp/cpp/config.h"
#include "tp/cpp/fields.h"
#include "tp/cpp/guard.h"
#include "tp/cpp/plugin.h"
#include "tp/cpp/tensor.h"
#include "tp/iface/loss.h"

namespace tp::cpp {

/// What a loss's forward returns: `sum`, the sum of the per-item losses (0-dim, floating, with
/// autograd history), and `count`, the number of items summed (0-dim, any numeric dtype, no
/// grad). The host divides the window's sums by its counts, so a masked loss counts only the
/// items it summed, on the device (a tensor, not an integer: no device sync).
struct LossSum {
  at::Tensor sum;
  at::Tensor count;
};

/// One named part of a loss (ABI 1.3 `terms`): `name` valid until destroy (static storage or a
/// string the loss owns), the same on every call; `sum` the part's sum over the forward's items,
/// detached (no autograd history), on the outputs' device. The host records it as
/// `train/loss/<name>` and `val/loss/<name>`, normalised like the total.
struct LossTerm {
  const char* name;
  at::Tensor sum;
};

/// What a loss declares about itself (ABI 1.9 `describe`): what it expects of its target fields,
/// which the host checks on the samples and the first batch before training, and which of its
/// named terms have a floor above zero. Owns every string it hands out; not copyable, so the
/// pointers the host holds stay valid: keep it a member of the loss, filled in its constructor.
class LossDescription {
 public:
  LossDescription() { refresh(); }
  LossDescription(const LossDescription&) = delete;
  LossDescription& operator=(const LossDescription&) = delete;

  /// `field` holds boxes as (x1, y1, x2, y2) rows with x2 > x1 and y2 > y1 (TP_CONTRACT_BOXES_XYXY).
  LossDescription& boxes_xyxy(const std::string& field) { return contract(TP_CONTRACT_BOXES_XYXY, field, 0); }
  /// `field` holds integer class ids in [0, class_count); 0: the count is not known to the loss,
  /// only negative ids are refused (TP_CONTRACT_CLASS_IDS).
  LossDescription& class_ids(const std::string& field, int64_t class_count = 0) {
    return contract(TP_CONTRACT_CLASS_IDS, field, class_count);
  }
  /// The named term `name` (one terms() returns) has a floor above zero that no model reaches.
  LossDescription& floored_term(const std::string& name) {
    floored_.push_back(keep(name));
    return refresh();
  }
  /// `host verify`'s overfit check passes when the loss less its floored terms falls below this
  /// fraction of its start (0 < fraction < 1; the host's own is 0.05).
  LossDescription& overfit_fraction(double fraction) {
    overfit_fraction_ = fraction;
    return refresh();
  }
  /// The C view, valid while this object lives.
  const tp_loss_description_t* view() const noexcept { return &view_; }

 private:
  LossDescription& contract(int32_t kind, const std::string& field, int64_t class_count) {
    contracts_.push_back({sizeof(tp_field_contract_t), kind, keep(field), class_count});
    return refresh();
  }
  const char* keep(const std::string& text) { return strings_.emplace_back(text).c_str(); }
  LossDescription& refresh() {
    view_ = {sizeof(tp_loss_description_t), contracts_.data(), static_cast<uint32_t>(contracts_.size()),
             floored_.data(),         static_cast<uint32_t>(floored_.size()),   overfit_fraction_};
    return *this;
  }

  std::deque<std::string> strings_; ///< a deque: adding a string never moves the others
  std::vector<tp_field_contract_t> contracts_;
  std::vector<const char*> floored_;
  double overfit_fraction_ = 0.0;
  tp_loss_description_t view_{};
};

namespace detail {

template <typename L, typename = void>
struct HasDescription : std::false_type {};
template <typename L>
struct HasDescription<L, std::void_t<decltype(static_cast<const LossDescription&>(std::declval<const L&>().description()))>>
    : std::true_type {};

template <typename L, typename = void>
struct HasTerms : std::false_type {};
template <typename L>
struct HasTerms<L, std::void_t<decltype(std::vector<LossTerm>(std::declval<const L&>().terms()))>> : std::true_type {};

template <typename L, const tp_descriptor_t& kDescriptor, auto kFactory>
struct LossAdapter : AdapterBase<L, kDescriptor, kFactory> {
  using Base = AdapterBase<L, kDescriptor, kFactory>;

  static tp_status forward(void* self, const tp_named_tensor_t* outputs, uint32_t output_count,
                           const tp_named_tensor_t* targets, uint32_t target_count, tp_tensor* out_loss_sum,
                           tp_tensor* out_item_count) {
    TP_GUARD(Base::host_of(self), {
      const std::string name = Base::name();
      if (out_loss_sum == nullptr || out_item_count == nullptr)
        throw Failure(TP_ERR_INVALID_ARGUMENT, name + ": forward: an out-parameter is NULL");
      *out_loss_sum = nullptr;
      *out_item_count = nullptr;
      if ((outputs == nullptr && output_count > 0) || (targets == nullptr && target_count > 0))
        throw Failure(TP_ERR_INVALID_ARGUMENT, name + ": forward: outputs or targets is NULL");
      LossSum result = Base::object(self, "forward")
                           .forward(Fields(outputs, output_count, "output"), Fields(targets, target_count, "target"));
      if (!result.sum.defined() || !result.count.defined())
        throw Failure(TP_ERR_INTERNAL, name + ": forward returned an undefined sum or count");
      // Both handles are made before either is handed over: if the second allocation fails,
      // the first is freed here and the host receives none.
      auto sum = std::make_unique<at::Tensor>(std::move(result.sum));
      auto count = std::make_unique<at::Tensor>(std::move(result.count));
      *out_loss_sum = reinterpret_cast<tp_tensor>(sum.release());
      *out_item_count = reinterpret_cast<tp_tensor>(count.release());
      return TP_OK;
    });
  }

  static tp_status terms(void* self, tp_named_tensor_t* out_terms, uint32_t capacity, uint32_t* out_count) {
    TP_GUARD(Base::host_of(self), {
      if (out_count == nullptr) throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(Base::name()) + ": terms: out_count is NULL");
      *out_count = 0;
      std::vector<LossTerm> named = static_cast<const L&>(Base::object(self, "terms")).terms();
      hand_over<&LossTerm::sum>(named, out_terms, capacity, out_count, std::string(Base::name()) + ": terms", "terms",
                                "a term");
      return TP_OK;
    });
  }

  static tp_status describe(void* self, const tp_loss_description_t** out_description) {
    TP_GUARD(Base::host_of(self), {
      if (out_description == nullptr)
        throw Failure(TP_ERR_INVALID_ARGUMENT, std::string(Base::name()) + ": describe: out_description is NULL");
      *out_description = static_cast<const L&>(Base::object(self, "describe")).description().view();
      return TP_OK;
    });
  }

  static constexpr tp_loss_v1_t table() {
    tp_loss_v1_t t{sizeof(tp_loss_v1_t), &Base::create, &Base::destroy, &forward, nullptr, nullptr};
    if constexpr (HasTerms<L>::value) t.terms = &terms;
    if constexpr (HasDescription<L>::value) t.describe = &describe;
    return t;
  }
};

template <typename L, const tp_descriptor_t& kDescriptor, auto kFactory>
inline constexpr tp_loss_v1_t kLossTable = LossAdapter<L, kDescriptor, kFactory>::table();

}  // namespace detail

/// The descriptor of a loss component: kind loss, Tier T, the schema `keys` (PLG-6) and the
/// example target fields `host plugins check` and `host verify` build a batch from. Static strings.
template <std::size_t N, std::size_t E>
constexpr tp_descriptor_t loss_descriptor(const char* id, const char* version, const char* description,
                                          const tp_config_key_t (&keys)[N], const tp_example_input_t (&examples)[E]) {
  return component_descriptor(TP_KIND_LOSS, TP_TIER_T, id, version, description, keys, N, examples, E);
}
/// The same without example fields.
template <std::size_t N>
constexpr tp_descriptor_t loss_descriptor(const char* id, const char* version, const char* description,
                                          const tp_config_key_t (&keys)[N]) {
  return component_descriptor(TP_KIND_LOSS, TP_TIER_T, id, version, description, keys, N, nullptr, 0);
}

/// The component entry (descriptor, "tp.loss/1", generated table) of loss class `L`, built by
/// `L(const ConfigReader&)` or, when given, by `kFactory` (`std::shared_ptr<L>` or
/// `std::unique_ptr<L>` `(*)(const ConfigReader&)`, L may then be an abstract base).
/// `kDescriptor` has static storage.
template <typename L, const tp_descriptor_t& kDescriptor, auto kFactory = nullptr>
constexpr Component loss_component() {
  return {&kDescriptor, TP_IFACE_LOSS_V1, &detail::kLossTable<L, kDescriptor, kFactory>};
}

}  // namespace tp::cpp

/// Defines `tp_entry` of a Tier T library NAME (its .so base name) whose one component is the
/// loss class CLASS described by DESCRIPTOR (a namespace-scope tp_descriptor_t).
#define TP_DEFINE_LOSS_PLUGIN(NAME, CLASS, DESCRIPTOR)                                           \
  namespace {                                                                                    \
  const ::tp::cpp::Component tp_detail_loss_components[] = {                                     \
      ::tp::cpp::loss_component<CLASS, DESCRIPTOR>()};                                           \
  }                                                                                              \
  TP_DEFINE_PLUGIN(NAME, TP_TORCH_BUILD_INFO_INIT, tp_detail_loss_components)

#endif  // TP_CPP_LOSS_ADAPTER_H
