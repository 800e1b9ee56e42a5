// basic_losses through the C ABI: each loss returns the sum of per-sample losses and the count,
// so sum / count equals LibTorch's mean reduction.
#include "loss_instance.h"

#include <c10/core/InferenceMode.h>

namespace {

using namespace tp::test;

TEST_CASE("cross_entropy: sum = mean reference * B, count = B") {
  at::manual_seed(0);
  const at::Tensor logits = at::randn({4, 3}).requires_grad_();
  const at::Tensor labels = at::tensor({0, 2, 1, 2}, at::kLong);
  Fields out{{"logits", logits}};
  Fields tgt{{"label", labels}};
  auto [sum, count] = Loss("org.torchhost.cross_entropy").forward(out, tgt);
  CHECK(value(sum) == doctest::Approx(value(at::cross_entropy_loss(logits, labels)) * 4).epsilon(1e-6));
  CHECK(count.item<int64_t>() == 4);
  CHECK(sum.requires_grad());  // differentiable back to the model's outputs

  auto [smoothed, n] = Loss("org.torchhost.cross_entropy", {{"label_smoothing", 0.1}}).forward(out, tgt);
  const at::Tensor reference = at::cross_entropy_loss(logits, labels, {}, at::Reduction::Mean, -100, 0.1);
  CHECK(value(smoothed) == doctest::Approx(value(reference) * 4).epsilon(1e-6));

  // A label of -100 is ignored: neither summed nor counted.
  Fields partial{{"label", at::tensor({0, -100, 1, 2}, at::kLong)}};
  auto [sum3, count3] = Loss("org.torchhost.cross_entropy").forward(out, partial);
  CHECK(count3.item<int64_t>() == 3);
  CHECK(value(sum3) == doctest::Approx(value(at::cross_entropy_loss(logits, partial.items[0].second)) * 3).epsilon(1e-6));
}

TEST_CASE("cross_entropy: class_weights give PyTorch's weighted mean, with smoothing and ignored labels") {
  at::manual_seed(2);
  const at::Tensor logits = at::randn({6, 3}).requires_grad_();
  const at::Tensor labels = at::tensor({0, 2, 1, 2, -100, 0}, at::kLong);
  const at::Tensor weight = at::tensor({0.5, 2.0, 1.0}, at::kFloat);
  Fields out{{"logits", logits}};
  Fields tgt{{"label", labels}};
  for (const double smoothing : {0.0, 0.1}) {
    CAPTURE(smoothing);
    Loss loss("org.torchhost.cross_entropy",
              {{"class_weights", std::vector<double>{0.5, 2.0, 1.0}}, {"label_smoothing", smoothing}});
    auto [sum, count] = loss.forward(out, tgt);
    // The weights of the labelled samples' classes: 0.5 + 1 + 2 + 1 + 0.5; the -100 is left out.
    CHECK(value(count) == doctest::Approx(5.0));
    const at::Tensor mean = at::cross_entropy_loss(logits, labels, weight, at::Reduction::Mean, -100, smoothing);
    CHECK(value(sum) / value(count) == doctest::Approx(value(mean)).epsilon(1e-6));
  }
  // Probability targets: PyTorch's mean divides by the samples, weighted or not.
  Loss weighted("org.torchhost.cross_entropy", {{"class_weights", std::vector<double>{0.5, 2.0, 1.0}}});
  Fields soft{{"label", at::softmax(at::randn({6, 3}), 1)}};
  auto [soft_sum, soft_count] = weighted.forward(out, soft);
  CHECK(soft_count.item<int64_t>() == 6);
  CHECK(value(soft_sum) / 6 ==
        doctest::Approx(value(at::cross_entropy_loss(logits, soft.items[0].second, weight))).epsilon(1e-6));
  // First called under inference mode (an evaluation, the sanity check), then under autograd (a
  // training step): the weights made in the first call must serve the second.
  Loss first_eval("org.torchhost.cross_entropy", {{"class_weights", std::vector<double>{0.5, 2.0, 1.0}}});
  {
    const c10::InferenceMode inference;
    Fields frozen{{"logits", at::randn({6, 3})}};
    first_eval.forward(frozen, tgt);
  }
  auto [trained, trained_count] = first_eval.forward(out, tgt);
  CHECK(trained.requires_grad());
  // A weight per class or a refusal naming the counts.
  Loss two("org.torchhost.cross_entropy", {{"class_weights", std::vector<double>{1.0, 2.0}}});
  tp_tensor refused_sum = nullptr, refused_count = nullptr;
  CHECK(two.t->forward(two.self, out.view(), out.size(), tgt.view(), tgt.size(), &refused_sum, &refused_count) ==
        TP_ERR_INVALID_ARGUMENT);
  CHECK(two.p.host.last_error.find("class_weights has 2 values but the output 'logits' has 3 classes") !=
        std::string::npos);
}

TEST_CASE("cross_entropy: probability targets (mixup, cutmix) with label smoothing equal PyTorch") {
  // Expected sums: torch 2.13 (.venv), F.cross_entropy(x, t, reduction="sum", label_smoothing=ls),
  // for these x and t; the index column uses t.argmax(1).
  const at::Tensor x = at::tensor({1.0f, -0.5f, 2.0f, 0.3f, 0.2f, -1.0f, -2.0f, 0.5f, 0.7f, 0.0f, 1.5f, -0.3f}).reshape({4, 3});
  const at::Tensor t = at::tensor({0.7f, 0.3f, 0.0f, 0.0f, 0.25f, 0.75f, 1.0f, 0.0f, 0.0f, 0.2f, 0.2f, 0.6f}).reshape({4, 3});
  const struct { double smoothing, probabilities, indices; } kPyTorch[] = {
      {0.0, 8.642253875732422, 8.912254333496094},
      {0.1, 8.359253883361816, 8.602253913879395},
      {0.3, 7.793253421783447, 7.9822540283203125},
  };
  Fields out{{"logits", x}};
  Fields soft{{"label", t}};
  Fields hard{{"label", t.argmax(1)}};
  for (const auto& row : kPyTorch) {
    Loss loss("org.torchhost.cross_entropy", {{"label_smoothing", row.smoothing}});
    auto [sum, count] = loss.forward(out, soft);
    CHECK(value(sum) == doctest::Approx(row.probabilities).epsilon(1e-6));
    CHECK(count.item<int64_t>() == 4);  // items = samples, as for index targets
    // PyTorch's definition, written out: smoothed targets (1 - ls) t + ls / C against log_softmax.
    const at::Tensor smoothed = t * (1.0 - row.smoothing) + row.smoothing / 3.0;
    CHECK(value(sum) == doctest::Approx(value(-(smoothed * x.log_softmax(1)).sum())).epsilon(1e-6));
    auto [hard_sum, hard_count] = loss.forward(out, hard);
    CHECK(value(hard_sum) == doctest::Approx(row.indices).epsilon(1e-6));
    CHECK(hard_count.item<int64_t>() == 4);
  }
  // A one-hot probability target is the index target.
  Loss plain("org.torchhost.cross_entropy");
  Fields one_hot{{"label", at::one_hot(t.argmax(1), 3).to(at::kFloat)}};
  CHECK(value(plain.forward(out, one_hot).first) == doctest::Approx(8.912254333496094).epsilon(1e-6));
}

TEST_CASE("mse and smooth_l1: per-sample mean, summed over the batch") {
  // By hand: sample 0 has errors (0, 0) -> mean 0; sample 1 errors (2, 2) -> mean 4. Sum 4.
  Fields out{{"bbox", at::tensor({0.0f, 0.0f, 2.0f, 2.0f}).reshape({2, 2})}};
  Fields tgt{{"bbox", at::zeros({2, 2})}};
  auto [sum, count] = Loss("org.torchhost.mse").forward(out, tgt);
  CHECK(value(sum) == doctest::Approx(4.0));
  CHECK(count.item<int64_t>() == 2);

  at::manual_seed(1);
  const at::Tensor pred = at::rand({4, 4});
  const at::Tensor truth = at::rand({4, 4});
  Fields o{{"bbox", pred}};
  Fields t{{"bbox", truth}};
  CHECK(value(Loss("org.torchhost.mse").forward(o, t).first) ==
        doctest::Approx(value(at::mse_loss(pred, truth)) * 4).epsilon(1e-6));
  auto [sl1, n] = Loss("org.torchhost.smooth_l1", {{"beta", 0.05}}).forward(o, t);
  CHECK(value(sl1) == doctest::Approx(value(at::smooth_l1_loss(pred, truth, at::Reduction::Mean, 0.05)) * 4).epsilon(1e-6));
  CHECK(n.item<int64_t>() == 4);
}

TEST_CASE("weighted_sum combines its terms") {
  at::manual_seed(2);
  const at::Tensor logits = at::randn({4, 3});
  const at::Tensor labels = at::tensor({1, 0, 2, 2}, at::kLong);
  const at::Tensor box = at::rand({4, 4});
  const at::Tensor box_truth = at::rand({4, 4});
  Fields out{{"logits", logits}, {"bbox", box}};
  Fields tgt{{"label", labels}, {"bbox", box_truth}};
  auto [sum, count] = Loss("org.torchhost.weighted_sum", {{"weights", std::vector<double>{0.5, 2.0}}}).forward(out, tgt);
  const double expected = 0.5 * value(at::cross_entropy_loss(logits, labels)) * 4 +
                          2.0 * value(at::smooth_l1_loss(box, box_truth)) * 4;
  CHECK(value(sum) == doctest::Approx(expected).epsilon(1e-6));
  CHECK(count.item<int64_t>() == 4);

  auto [mse_only, n] = Loss("org.torchhost.weighted_sum", {{"losses", std::vector<std::string>{"mse"}},
                                                          {"outputs", std::vector<std::string>{"bbox"}},
                                                          {"targets", std::vector<std::string>{"bbox"}},
                                                          {"weights", std::vector<double>{3.0}}})
                               .forward(out, tgt);
  CHECK(value(mse_only) == doctest::Approx(3.0 * value(at::mse_loss(box, box_truth)) * 4).epsilon(1e-6));
}

TEST_CASE("loss configuration and input errors") {
  LoadedPlugin& p = plugin("basic_losses");
  const tp_loss_v1_t& t = p.table<tp_loss_v1_t>("org.torchhost.weighted_sum", TP_IFACE_LOSS_V1);
  FakeConfig cfg;
  fill_defaults(cfg, p.descriptor("org.torchhost.weighted_sum"));
  cfg.values["weights"] = std::vector<double>{1.0};
  void* self = nullptr;
  CHECK(t.create(&p.host.host, &cfg.view, &self) == TP_ERR_CONFIG);
  CHECK(p.host.last_error.find("equal length") != std::string::npos);
  cfg.values["weights"] = std::vector<double>{1.0, 1.0};
  cfg.values["losses"] = std::vector<std::string>{"cross_entropy", "hinge"};
  CHECK(t.create(&p.host.host, &cfg.view, &self) == TP_ERR_CONFIG);
  CHECK(p.host.last_error.find("'hinge'") != std::string::npos);
  CHECK(self == nullptr);
  t.destroy(nullptr);

  Loss ce("org.torchhost.cross_entropy");
  Fields out{{"logits", at::randn({4, 3})}};
  Fields no_label{{"labels", at::zeros({4}, at::kLong)}};
  tp_tensor sum = nullptr, count = nullptr;
  CHECK(ce.t->forward(ce.self, out.view(), out.size(), no_label.view(), no_label.size(), &sum, &count) ==
        TP_ERR_INVALID_ARGUMENT);
  CHECK(p.host.last_error.find("no target named 'label'") != std::string::npos);
  CHECK(sum == nullptr);

  Loss mse("org.torchhost.mse");
  Fields box{{"bbox", at::zeros({4, 4})}};
  Fields short_box{{"bbox", at::zeros({4, 2})}};
  CHECK(mse.t->forward(mse.self, box.view(), box.size(), short_box.view(), short_box.size(), &sum, &count) ==
        TP_ERR_INVALID_ARGUMENT);
  CHECK(p.host.last_error.find("[4, 2]") != std::string::npos);  // no silent broadcasting
}

TEST_CASE("cross_entropy and weighted_sum: a float label of the class-index shape is named as a dtype mistake") {
  LoadedPlugin& p = plugin("basic_losses");
  Fields out{{"logits", at::randn({4, 3})}};
  Fields float_label{{"label", at::zeros({4}, at::kFloat)}};
  const std::string expected = "target 'label' float32[4]: class indices need an integer dtype (int64). Give the "
                               "dataset's field 'label' as int64, or give probability targets of the logits' shape "
                               "[4, 3] (output 'logits')";
  for (const char* id : {"org.torchhost.cross_entropy", "org.torchhost.weighted_sum"}) {
    CAPTURE(id);
    Loss loss(id, std::string(id) == "org.torchhost.weighted_sum"
                      ? std::map<std::string, FakeConfig::Value>{{"losses", std::vector<std::string>{"cross_entropy"}},
                                                                 {"outputs", std::vector<std::string>{"logits"}},
                                                                 {"targets", std::vector<std::string>{"label"}},
                                                                 {"weights", std::vector<double>{1.0}}}
                      : std::map<std::string, FakeConfig::Value>{});
    tp_tensor sum = nullptr, count = nullptr;
    CHECK(loss.t->forward(loss.self, out.view(), out.size(), float_label.view(), float_label.size(), &sum, &count) ==
          TP_ERR_INVALID_ARGUMENT);
    CHECK_MESSAGE(p.host.last_error.find(expected) != std::string::npos, p.host.last_error);
    CHECK(sum == nullptr);
  }
  // A float target of another shape is still a shape mistake: probabilities must match the logits.
  Loss ce("org.torchhost.cross_entropy");
  Fields wrong_probabilities{{"label", at::zeros({4, 2}, at::kFloat)}};
  tp_tensor sum = nullptr, count = nullptr;
  CHECK(ce.t->forward(ce.self, out.view(), out.size(), wrong_probabilities.view(), wrong_probabilities.size(), &sum,
                      &count) == TP_ERR_INVALID_ARGUMENT);
  CHECK(p.host.last_error.find("expected probability targets of the logits' shape") != std::string::npos);
  CHECK(p.host.last_error.find("integer dtype") == std::string::npos);
}

}  // namespace
