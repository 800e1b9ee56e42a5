// basic_losses on segmentation masks: cross_entropy's ignore_index over [B, C, H, W] logits, and
// weighted_sum's items = "labelled" for a main and an auxiliary output (torchvision's
// `ce(out) + 0.5 ce(aux)`). Python's F.cross_entropy is the oracle in
// tests/plugins/metrics/segmentation_oracle; these cases pin the counts and the edge cases.
#include "loss_instance.h"

namespace {

using namespace tp::test;

const std::map<std::string, FakeConfig::Value> kOutAndAux{
    {"losses", std::vector<std::string>{"cross_entropy", "cross_entropy"}},
    {"outputs", std::vector<std::string>{"out", "aux"}},
    {"targets", std::vector<std::string>{"mask", "mask"}},
    {"weights", std::vector<double>{1.0, 0.5}},
    {"ignore_index", int64_t{255}},
    {"items", std::string("labelled")},
};

/// A [2, 3, 4] mask of classes 0..3 with `ignored` pixels (the first ones in memory order) set to 255.
at::Tensor mask_with(int64_t ignored) {
  at::Tensor mask = at::arange(24, at::kLong).remainder(4).reshape({2, 3, 4});
  mask.view({-1}).slice(0, 0, ignored).fill_(255);
  return mask;
}

TEST_CASE("cross_entropy with ignore_index = 255: the labelled pixels are summed and counted") {
  at::manual_seed(3);
  const at::Tensor logits = at::randn({2, 4, 3, 4}).requires_grad_();
  const at::Tensor mask = mask_with(5);  // 24 pixels, 5 ignored
  Fields out{{"out", logits}};
  Fields tgt{{"mask", mask}};
  Loss loss("org.torchhost.cross_entropy", {{"output", std::string("out")}, {"target", std::string("mask")},
                                            {"ignore_index", int64_t{255}}});
  auto [sum, count] = loss.forward(out, tgt);
  CHECK(count.item<int64_t>() == 19);
  const at::Tensor mean = at::cross_entropy_loss(logits, mask, {}, at::Reduction::Mean, 255);
  CHECK(value(sum) / 19.0 == doctest::Approx(value(mean)).epsilon(1e-6));
  // The same sum written out: -log_softmax at the label, over the pixels that are not 255.
  const at::Tensor safe = mask.masked_fill(mask.eq(255), 0);
  const at::Tensor picked = -logits.log_softmax(1).gather(1, safe.unsqueeze(1)).squeeze(1);
  CHECK(value(sum) == doctest::Approx(value(picked.masked_fill(mask.eq(255), 0).sum())).epsilon(1e-6));

  // The default stays PyTorch's -100: a 255 label is then a class index out of range.
  Loss plain("org.torchhost.cross_entropy", {{"output", std::string("out")}, {"target", std::string("mask")}});
  tp_tensor s = nullptr, c = nullptr;
  CHECK(plain.t->forward(plain.self, out.view(), out.size(), tgt.view(), tgt.size(), &s, &c) != TP_OK);
  CHECK(s == nullptr);
}

TEST_CASE("an all-ignored batch gives sum 0 and count 0, and zero gradients, where PyTorch's mean is NaN") {
  at::manual_seed(4);
  const at::Tensor logits = at::randn({2, 4, 3, 4}).requires_grad_();
  const at::Tensor aux = at::randn({2, 4, 3, 4}).requires_grad_();
  const at::Tensor mask = at::full({2, 3, 4}, 255, at::kLong);
  CHECK(std::isnan(value(at::cross_entropy_loss(logits, mask, {}, at::Reduction::Mean, 255))));

  Fields out{{"out", logits}, {"aux", aux}};
  Fields tgt{{"mask", mask}};
  for (const bool weighted : {false, true}) {
    CAPTURE(weighted);
    Loss loss(weighted ? "org.torchhost.weighted_sum" : "org.torchhost.cross_entropy",
              weighted ? kOutAndAux
                       : std::map<std::string, FakeConfig::Value>{{"output", std::string("out")},
                                                                  {"target", std::string("mask")},
                                                                  {"ignore_index", int64_t{255}},
                                                                  {"label_smoothing", 0.1}});
    auto [sum, count] = loss.forward(out, tgt);
    CHECK(value(sum) == 0.0);
    CHECK(count.item<int64_t>() == 0);
    sum.backward();
    CHECK(value(logits.grad().abs().max()) == 0.0);  // finite: nothing NaN reaches the weights
    logits.mutable_grad().reset();
    if (aux.grad().defined()) CHECK(value(aux.grad().abs().max()) == 0.0);
    aux.mutable_grad().reset();
  }
}

TEST_CASE("weighted_sum, items = labelled: ce(out) + 0.5 ce(aux) over the labelled pixels, as torchvision") {
  at::manual_seed(5);
  const at::Tensor logits = at::randn({2, 4, 3, 4});
  const at::Tensor aux = at::randn({2, 4, 3, 4});
  const at::Tensor mask = mask_with(7);
  Fields out{{"out", logits}, {"aux", aux}};
  Fields tgt{{"mask", mask}};
  Loss loss("org.torchhost.weighted_sum", kOutAndAux);
  auto [sum, count] = loss.forward(out, tgt);
  CHECK(count.item<int64_t>() == 17);
  // torchvision's references/segmentation criterion, each term a mean over the labelled pixels.
  const double torchvision = value(at::cross_entropy_loss(logits, mask, {}, at::Reduction::Mean, 255)) +
                             0.5 * value(at::cross_entropy_loss(aux, mask, {}, at::Reduction::Mean, 255));
  CHECK(value(sum) / 17.0 == doctest::Approx(torchvision).epsilon(1e-6));
  // The terms (train/loss/out, train/loss/aux) are the weighted parts and add up to the sum.
  const auto terms = loss.terms();
  REQUIRE(terms.size() == 2);
  CHECK(value(terms.at("out")) ==
        doctest::Approx(value(at::cross_entropy_loss(logits, mask, {}, at::Reduction::Sum, 255))).epsilon(1e-6));
  CHECK(value(terms.at("aux")) ==
        doctest::Approx(0.5 * value(at::cross_entropy_loss(aux, mask, {}, at::Reduction::Sum, 255))).epsilon(1e-6));
  CHECK(value(terms.at("out") + terms.at("aux")) == doctest::Approx(value(sum)).epsilon(1e-6));

  // items = "samples" (the default) keeps its meaning: each sample's mean over all its pixels,
  // an ignored one adding 0; count = B.
  std::map<std::string, FakeConfig::Value> per_sample = kOutAndAux;
  per_sample["items"] = std::string("samples");
  auto [sample_sum, samples] = Loss("org.torchhost.weighted_sum", per_sample).forward(out, tgt);
  CHECK(samples.item<int64_t>() == 2);
  const at::Tensor labelled = mask.ne(255);
  const at::Tensor safe = mask.masked_fill(labelled.logical_not(), 0);
  const auto per_pixel = [&](const at::Tensor& x) {
    return at::cross_entropy_loss(x, safe, {}, at::Reduction::None).mul(labelled).reshape({2, -1}).mean(1).sum();
  };
  CHECK(value(sample_sum) == doctest::Approx(value(per_pixel(logits) + 0.5 * per_pixel(aux))).epsilon(1e-6));
}

TEST_CASE("weighted_sum, items = labelled: refused unless every term is a cross entropy over one target") {
  LoadedPlugin& p = plugin("basic_losses");
  const tp_loss_v1_t& t = p.table<tp_loss_v1_t>("org.torchhost.weighted_sum", TP_IFACE_LOSS_V1);
  const auto refused = [&](const std::string& key, FakeConfig::Value v, const std::string& message) {
    FakeConfig cfg;
    fill_defaults(cfg, p.descriptor("org.torchhost.weighted_sum"));
    for (const auto& [k, preset] : kOutAndAux) cfg.values[k] = preset;
    cfg.values[key] = std::move(v);
    void* self = nullptr;
    CHECK(t.create(&p.host.host, &cfg.view, &self) == TP_ERR_CONFIG);
    CHECK(self == nullptr);
    CHECK_MESSAGE(p.host.last_error.find(message) != std::string::npos, p.host.last_error);
  };
  refused("losses", std::vector<std::string>{"cross_entropy", "smooth_l1"}, "every term must be cross_entropy");
  refused("targets", std::vector<std::string>{"mask", "label"}, "got 'mask' and 'label'");
  refused("items", std::string("pixels"), "items must be \"samples\" or \"labelled\"");

  // An auxiliary output of another size than the mask is a shape error naming both fields.
  Loss loss("org.torchhost.weighted_sum", kOutAndAux);
  Fields out{{"out", at::randn({2, 4, 3, 4})}, {"aux", at::randn({2, 4, 6, 8})}};
  Fields tgt{{"mask", mask_with(0)}};
  tp_tensor sum = nullptr, count = nullptr;
  CHECK(loss.t->forward(loss.self, out.view(), out.size(), tgt.view(), tgt.size(), &sum, &count) == TP_ERR_INVALID_ARGUMENT);
  CHECK(p.host.last_error.find("output 'aux' [2, 4, 6, 8] and target 'mask' [2, 3, 4]") != std::string::npos);
}

// A mask value of 7 with 5 classes (a trial's segmentation set, the dataset's num_classes unset)
// stopped training with PyTorch's "Target 7 is out of bounds", naming no field and no way on.
TEST_CASE("a class id outside the logits' classes, not ignore_index, is refused naming it and the dataset's check") {
  LoadedPlugin& p = plugin("basic_losses");
  at::manual_seed(6);
  const at::Tensor mask = mask_with(5);  // classes 0..3 and 255 (ignored)
  Fields out{{"out", at::randn({2, 4, 3, 4})}, {"aux", at::randn({2, 4, 3, 4})}};
  const std::map<std::string, FakeConfig::Value> single{
      {"output", std::string("out")}, {"target", std::string("mask")}, {"ignore_index", int64_t{255}}};
  const auto refused = [&](const std::string& id, const std::map<std::string, FakeConfig::Value>& config, int64_t bad) {
    CAPTURE(id);
    CAPTURE(bad);
    at::Tensor beyond = mask.clone();
    beyond.view({-1})[17] = bad;  // one pixel among labelled and ignored ones
    Fields tgt{{"mask", beyond}};
    Loss loss(id.c_str(), config);
    tp_tensor sum = nullptr, count = nullptr;
    CHECK(loss.t->forward(loss.self, out.view(), out.size(), tgt.view(), tgt.size(), &sum, &count) ==
          TP_ERR_INVALID_ARGUMENT);
    CHECK(sum == nullptr);
    const std::string& error = p.host.last_error;
    CHECK_MESSAGE(error.find("target 'mask' holds the class id " + std::to_string(bad) + ", outside [0, 4) of the 4 "
                             "classes of output 'out' (its dimension 1), and not ignore_index (255)") != std::string::npos,
                  error);
    CHECK_MESSAGE(error.find("the dataset's num_classes key (segmentation_folder: data.train.num_classes = 4)") !=
                      std::string::npos,
                  error);
  };
  refused("org.torchhost.cross_entropy", single, 7);
  refused("org.torchhost.cross_entropy", single, 4);
  refused("org.torchhost.cross_entropy", single, -1);
  refused("org.torchhost.weighted_sum", kOutAndAux, 7);
  std::map<std::string, FakeConfig::Value> per_sample = kOutAndAux;
  per_sample["items"] = std::string("samples");
  refused("org.torchhost.weighted_sum", per_sample, 7);

  // ignore_index itself, and every id in range, pass (mask_with holds both).
  Fields tgt{{"mask", mask}};
  Loss loss("org.torchhost.cross_entropy", single);
  CHECK(loss.forward(out, tgt).second.item<int64_t>() == 19);
}

}  // namespace
