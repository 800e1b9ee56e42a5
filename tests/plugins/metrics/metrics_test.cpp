// basic_metrics through the C ABI, on hand-made tensors whose answers are worked out below.
#include "metric_instance.h"

namespace {

using namespace tp::test;

// Six samples, three classes. Top-1 predictions and top-2 sets:
//   s0 [2.0, 1.0, 0.1] label 0: top1 0 hit,  top2 {0,1} hit
//   s1 [0.5, 2.5, 1.0] label 2: top1 1 miss, top2 {1,2} hit
//   s2 [0.2, 0.3, 3.0] label 2: top1 2 hit,  top2 {2,1} hit
//   s3 [1.5, 0.1, 1.0] label 1: top1 0 miss, top2 {0,2} miss
//   s4 [0.1, 1.2, 0.3] label 1: top1 1 hit,  top2 {1,2} hit
//   s5 [1.0, 0.9, 2.0] label 0: top1 2 miss, top2 {2,0} hit
// top-1 accuracy 3/6 = 0.5, top-2 accuracy 5/6.
const at::Tensor kLogits = at::tensor({2.0, 1.0, 0.1, 0.5, 2.5, 1.0, 0.2, 0.3, 3.0,
                                       1.5, 0.1, 1.0, 0.1, 1.2, 0.3, 1.0, 0.9, 2.0}).reshape({6, 3});
const at::Tensor kLabels = at::tensor({0, 2, 2, 1, 1, 0}, at::kLong);

TEST_CASE("accuracy and top-k accuracy") {
  Fields out{{"logits", kLogits}};
  Fields tgt{{"label", kLabels}};
  Metric top1("org.torchhost.accuracy");
  top1.update(out, tgt);
  CHECK(top1.compute().at("accuracy") == doctest::Approx(0.5));
  Metric top2("org.torchhost.accuracy", {{"top_k", int64_t{2}}});
  top2.update(out, tgt);
  CHECK(top2.compute().at("top2_accuracy") == doctest::Approx(5.0 / 6.0));
}

TEST_CASE("accuracy and f1 with probability targets (mixup, cutmix) read their argmax") {
  // Soft labels whose argmax is kLabels: the same counts as the integer labels.
  const at::Tensor soft = at::one_hot(kLabels, kLogits.size(1)).to(at::kFloat) * 0.6 +
                          at::full(kLogits.sizes(), 0.4 / static_cast<double>(kLogits.size(1)));
  REQUIRE(at::equal(soft.argmax(1), kLabels));
  Fields out{{"logits", kLogits}};
  Fields hard{{"label", kLabels}};
  Fields tgt{{"label", soft}};
  Metric accuracy("org.torchhost.accuracy");
  accuracy.update(out, tgt);
  CHECK(accuracy.compute().at("accuracy") == doctest::Approx(0.5));
  Metric f1_soft("org.torchhost.f1", {{"num_classes", kLogits.size(1)}});
  Metric f1_hard("org.torchhost.f1", {{"num_classes", kLogits.size(1)}});
  f1_soft.update(out, tgt);
  f1_hard.update(out, hard);
  CHECK(f1_soft.compute().at("f1") == f1_hard.compute().at("f1"));
  // A probability target of another width is refused, naming both fields.
  Metric wide("org.torchhost.accuracy");
  Fields bad{{"label", at::zeros({kLogits.size(0), kLogits.size(1) + 1})}};
  CHECK(wide.t->update(wide.self, out.view(), out.size(), bad.view(), bad.size()) == TP_ERR_INVALID_ARGUMENT);
  CHECK(wide.p.host.last_error.find("probabilities [B, C]") != std::string::npos);
}

TEST_CASE("state is additive, aliased by visit_state, and zeroed by reset") {
  Metric whole("org.torchhost.accuracy");
  Fields out{{"logits", kLogits}};
  Fields tgt{{"label", kLabels}};
  whole.update(out, tgt);

  Metric halves("org.torchhost.accuracy");
  Fields out_a{{"logits", kLogits.slice(0, 0, 4)}}, tgt_a{{"label", kLabels.slice(0, 0, 4)}};
  Fields out_b{{"logits", kLogits.slice(0, 4, 6)}}, tgt_b{{"label", kLabels.slice(0, 4, 6)}};
  halves.update(out_a, tgt_a);
  halves.update(out_b, tgt_b);
  CHECK(equal_states(whole.state(), halves.state()));
  CHECK(halves.compute().at("accuracy") == doctest::Approx(0.5));

  // The host all-reduces in place through the handles: simulate a second rank with 2/2 correct.
  for (const auto& e : visit_all(halves.t->visit_state, halves.self)) tensor_of(e.handle).add_(2);
  CHECK(halves.compute().at("accuracy") == doctest::Approx(5.0 / 8.0));

  REQUIRE(halves.t->reset(halves.self) == TP_OK);
  for (const at::Tensor& s : halves.state()) CHECK(s.eq(0).all().item<bool>());
  CHECK(std::isnan(halves.compute().at("accuracy")));  // nothing seen: undefined, not 0
}

TEST_CASE("macro F1 from a hand-built confusion") {
  // predictions [0,0,1,1,2,2,2,0], labels [0,0,1,2,2,2,1,1]:
  //   class 0: tp 2 (s0,s1), fp 1 (s7), fn 0          -> F1 = 2*2/(2*2+1+0) = 0.8
  //   class 1: tp 1 (s2),    fp 1 (s3), fn 2 (s6,s7)  -> F1 = 2/(2+1+2)     = 0.4
  //   class 2: tp 2 (s4,s5), fp 1 (s6), fn 1 (s3)     -> F1 = 4/(4+1+1)     = 2/3
  // macro F1 = (0.8 + 0.4 + 2/3) / 3 = 0.6222...
  const at::Tensor predicted = at::tensor({0, 0, 1, 1, 2, 2, 2, 0}, at::kLong);
  const at::Tensor labels = at::tensor({0, 0, 1, 2, 2, 2, 1, 1}, at::kLong);
  const double expected = (0.8 + 0.4 + 2.0 / 3.0) / 3.0;
  {
    Fields out{{"logits", at::one_hot(predicted, 3).to(at::kFloat)}};
    Fields tgt{{"label", labels}};
    Metric f1("org.torchhost.f1");
    f1.update(out, tgt);
    CHECK(f1.compute().at("f1") == doctest::Approx(expected));
    const auto s = f1.state();  // tp, fp, fn per class
    CHECK(at::equal(s[0], at::tensor({2, 1, 2}, at::kLong)));
    CHECK(at::equal(s[1], at::tensor({1, 1, 1}, at::kLong)));
    CHECK(at::equal(s[2], at::tensor({0, 2, 1}, at::kLong)));

    Metric halves("org.torchhost.f1");
    Fields out_a{{"logits", out.items[0].second.slice(0, 0, 3)}}, tgt_a{{"label", labels.slice(0, 0, 3)}};
    Fields out_b{{"logits", out.items[0].second.slice(0, 3, 8)}}, tgt_b{{"label", labels.slice(0, 3, 8)}};
    halves.update(out_a, tgt_a);
    halves.update(out_b, tgt_b);
    CHECK(equal_states(f1.state(), halves.state()));
  }
  // A fourth class that never occurs and is never predicted has no F1 and is left out.
  Fields out4{{"logits", at::one_hot(predicted, 4).to(at::kFloat)}};
  Fields tgt4{{"label", labels}};
  Metric f1_4("org.torchhost.f1", {{"num_classes", int64_t{4}}});
  f1_4.update(out4, tgt4);
  CHECK(f1_4.compute().at("f1") == doctest::Approx(expected));
}

TEST_CASE("IoU and Dice over all pixels") {
  // Two 2x2 masks. Logit +5 -> predicted, -5 -> not (sigmoid(5) = 0.993 > 0.5).
  //   sample 0: predicted {(0,0),(1,0)}, truth {(0,0),(0,1)}: I 1, U 3, |P|+|T| 4
  //   sample 1: predicted {(1,1)},       truth {(1,1)}:       I 1, U 1, |P|+|T| 2
  // IoU = 2/4 = 0.5 (not the per-image mean 2/3), Dice = 2*2/6 = 2/3.
  const at::Tensor logits = at::tensor({5.0f, -5.0f, 5.0f, -5.0f, -5.0f, -5.0f, -5.0f, 5.0f}).reshape({2, 1, 2, 2});
  const at::Tensor mask = at::tensor({1.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 1.0f}).reshape({2, 2, 2});
  Fields out{{"mask_logits", logits}};
  Fields tgt{{"mask", mask}};
  Metric iou("org.torchhost.iou");
  iou.update(out, tgt);
  auto v = iou.compute();
  CHECK(v.at("iou") == doctest::Approx(0.5));
  CHECK(v.at("dice") == doctest::Approx(2.0 / 3.0));

  Metric halves("org.torchhost.iou");
  Fields out_a{{"mask_logits", logits.slice(0, 0, 1)}}, tgt_a{{"mask", mask.slice(0, 0, 1)}};
  Fields out_b{{"mask_logits", logits.slice(0, 1, 2)}}, tgt_b{{"mask", mask.slice(0, 1, 2)}};
  halves.update(out_a, tgt_a);
  halves.update(out_b, tgt_b);
  CHECK(equal_states(iou.state(), halves.state()));

  // threshold 0.999 > sigmoid(5): nothing predicted, so I = 0 and both scores are 0.
  Metric strict("org.torchhost.iou", {{"threshold", 0.999}});
  strict.update(out, tgt);
  CHECK(strict.compute().at("iou") == doctest::Approx(0.0));
}

TEST_CASE("MAE over all elements") {
  // |1-1.5| + |2-2| + |3-2| + |4-6| = 0.5 + 0 + 1 + 2 = 3.5 over 4 elements -> 0.875.
  Fields out{{"bbox", at::tensor({1.0f, 2.0f, 3.0f, 4.0f}).reshape({2, 2})}};
  Fields tgt{{"bbox", at::tensor({1.5f, 2.0f, 2.0f, 6.0f}).reshape({2, 2})}};
  Metric mae("org.torchhost.mae");
  mae.update(out, tgt);
  CHECK(mae.compute().at("mae") == doctest::Approx(0.875));
  Fields out_a{{"bbox", out.items[0].second.slice(0, 0, 1)}}, tgt_a{{"bbox", tgt.items[0].second.slice(0, 0, 1)}};
  Fields out_b{{"bbox", out.items[0].second.slice(0, 1, 2)}}, tgt_b{{"bbox", tgt.items[0].second.slice(0, 1, 2)}};
  Metric halves("org.torchhost.mae");
  halves.update(out_a, tgt_a);
  halves.update(out_b, tgt_b);
  CHECK(equal_states(mae.state(), halves.state()));
}

TEST_CASE("metric errors name the missing field") {
  LoadedPlugin& p = plugin("basic_metrics");
  Metric acc("org.torchhost.accuracy");
  Fields out{{"scores", kLogits}};
  Fields tgt{{"label", kLabels}};
  CHECK(acc.t->update(acc.self, out.view(), out.size(), tgt.view(), tgt.size()) == TP_ERR_INVALID_ARGUMENT);
  CHECK(p.host.last_error.find("no output named 'logits'") != std::string::npos);

  Metric f1("org.torchhost.f1", {{"num_classes", int64_t{5}}});
  Fields logits{{"logits", kLogits}};
  CHECK(f1.t->update(f1.self, logits.view(), logits.size(), tgt.view(), tgt.size()) == TP_ERR_INVALID_ARGUMENT);
  CHECK(p.host.last_error.find("num_classes is 5") != std::string::npos);

  const tp_metric_v1_t& t = p.table<tp_metric_v1_t>("org.torchhost.accuracy", TP_IFACE_METRIC_V1);
  FakeConfig cfg;
  fill_defaults(cfg, p.descriptor("org.torchhost.accuracy"));
  cfg.values["top_k"] = int64_t{0};
  void* self = nullptr;
  CHECK(t.create(&p.host.host, &cfg.view, &self) == TP_ERR_CONFIG);
  CHECK(p.host.last_error.find("top_k") != std::string::npos);
  t.destroy(nullptr);
}

}  // namespace
