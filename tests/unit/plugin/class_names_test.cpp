// The names a dataset lends for its classes (plugin ABI 1.12, tp_dataset_v1_t::class_names) and
// for its samples (1.13, sample_keys) as the host reads them: what passes, what each malformed
// answer is refused with (naming the plugin when a real library lends it), and a table from ABI
// 1.11 that ends before both members.
#include <string>
#include <vector>

#include "tp/framework/config/run_config.h"
#include "tp/framework/data/class_names.h"
#include "tp/framework/plugin/dataset_proxy.h"

#include "loader_test_util.h"

namespace {

using namespace tp;
using namespace tp::test;

std::string refusal(const tp_class_names_t* lent) {
  try {
    (void)DatasetProxy::parse_class_names(lent);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string refusal_of(const std::vector<const char*>& names, const char* field = "label") {
  const tp_class_names_t lent{sizeof(tp_class_names_t), static_cast<uint32_t>(names.size()), field, names.data()};
  return refusal(&lent);
}

DatasetProxy dataset(const std::shared_ptr<PluginLibrary>& library, const std::string& id) {
  for (const auto& component : library->components())
    if (component.id == id) return DatasetProxy({&component, library}, ComponentConfig{id, "data.train", {}}, "train");
  FAIL("no component " << id);
  throw Error("unreachable");
}

}  // namespace

TEST_CASE("class names: UTF-8 names of any script pass; NULL lends nothing") {
  const std::vector<const char*> names = {"Schäferhund", "猫", "🐕 dog", "a,b \"quoted\""};
  const tp_class_names_t lent{sizeof(tp_class_names_t), 4, "label", names.data()};
  const ClassNames classes = DatasetProxy::parse_class_names(&lent);
  CHECK(classes.field == "label");
  CHECK(classes.names == std::vector<std::string>(names.begin(), names.end()));
  CHECK(DatasetProxy::parse_class_names(nullptr).empty());
}

TEST_CASE("class names: each malformed declaration is refused, saying what is wrong") {
  CHECK(refusal_of({"cat", "dog\n"}).find("class 1 of field 'label' holds the control character U+000A") != std::string::npos);
  CHECK(refusal_of({"cat", "\x7f"}).find("U+007F") != std::string::npos);
  CHECK(refusal_of({"\xC2\x85"}).find("U+0085") != std::string::npos);             // NEL, a C1 control
  CHECK(refusal_of({"ok", "\xC0\xAF"}).find("class 1 of field 'label' is not valid UTF-8") != std::string::npos); // overlong '/'
  CHECK(refusal_of({"\xED\xA0\x80"}).find("not valid UTF-8") != std::string::npos); // a surrogate
  CHECK(refusal_of({"\xE7\x8C"}).find("not valid UTF-8") != std::string::npos);     // a cut sequence
  CHECK(refusal_of({""}).find("class 0 of field 'label' is empty") != std::string::npos);
  const std::string long_name(257, 'x');
  CHECK(refusal_of({long_name.c_str()}).find("is longer than 256 bytes") != std::string::npos);
  CHECK(refusal_of({std::string(256, 'x').c_str()}).empty());
  CHECK(refusal_of({"cat", nullptr}).find("the name of class 1 is NULL") != std::string::npos);
  CHECK(refusal_of({"cat"}, nullptr).find("no label field is named") != std::string::npos);
  const tp_class_names_t no_array{sizeof(tp_class_names_t), 3, "label", nullptr};
  CHECK(refusal(&no_array).find("3 class names at a NULL pointer") != std::string::npos);
  const tp_class_names_t small{8, 0, "label", nullptr};
  CHECK(refusal(&small).find("struct_size 8 is smaller than tp_class_names_t") != std::string::npos);
}

TEST_CASE("a dataset lends its class names through the C++ adapter; a bad name is refused naming the plugin") {
  TestHost host;
  const auto library = PluginLibrary::load(fixture("class_names"), host.services);
  const DatasetProxy named = dataset(library, "org.test.named_classes");
  CHECK(named.class_names() == ClassNames{"label", {"cat", "dog"}});
  try {
    (void)dataset(library, "org.test.bad_class_names");
    FAIL("a dataset lending a name with a line break was created");
  } catch (const PluginError& e) {
    CHECK(e.component_id() == "org.test.bad_class_names");
    CHECK(e.function() == "class_names");
    CHECK_MESSAGE(contains(e.what(), "(class_names.so) lent its class names wrongly on split 'train'"), e.what());
    CHECK_MESSAGE(contains(e.what(), "class 1 of field 'label' holds the control character U+000A"), e.what());
  }
}

TEST_CASE("a dataset table from ABI 1.11 loads, and nothing past its struct_size is read as class or sample names") {
  TestHost host;
  const auto library = PluginLibrary::load(fixture("class_names"), host.services);
  const DatasetProxy old = dataset(library, "org.test.old_dataset");
  CHECK(old.size() == 2);
  CHECK(old.class_names().empty());
  CHECK(old.sample_keys().empty());
}

std::string key_refusal(const std::vector<const char*>& keys, uint64_t size) {
  try {
    (void)DatasetProxy::parse_sample_keys(keys.empty() ? nullptr : keys.data(), keys.size(), size);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("sample names (ABI 1.13): one per sample in index order; NULL is an empty name; each malformed answer refused") {
  const std::vector<const char*> keys = {"train/cat/1.jpg", nullptr, "shards/val-000000.tar:cat/2"};
  CHECK(DatasetProxy::parse_sample_keys(keys.data(), 3, 3) ==
        std::vector<std::string>{"train/cat/1.jpg", "", "shards/val-000000.tar:cat/2"});
  CHECK(DatasetProxy::parse_sample_keys(nullptr, 0, 0).empty());
  CHECK(contains(key_refusal(keys, 4), "3 names for 4 samples (one per sample, in index order)"));
  CHECK(key_refusal({}, 0).empty()); // no samples, no names: accepted
  try {
    (void)DatasetProxy::parse_sample_keys(nullptr, 2, 2);
    FAIL("names at a NULL pointer were accepted");
  } catch (const Error& e) {
    CHECK(contains(e.what(), "2 names at a NULL pointer"));
  }
  const std::string longest(DatasetProxy::kMaxSampleKeyBytes, 'x'), longer = longest + "x";
  CHECK(key_refusal({longest.c_str()}, 1).empty());
  CHECK(contains(key_refusal({"ok", longer.c_str()}, 2), "the name of sample 1 is longer than 4096 bytes"));
}

TEST_CASE("a dataset names its samples through the C++ adapter; a wrong count is refused naming the plugin") {
  TestHost host;
  const auto library = PluginLibrary::load(fixture("class_names"), host.services);
  const DatasetProxy named = dataset(library, "org.test.named_classes");
  CHECK(named.sample_keys() == std::vector<std::string>{"a.png", "b, \"quoted\".png"});
  CHECK(named.sample_keys() == named.sample_keys()); // the adapter builds the list once and lends it again
  const DatasetProxy miscounted = dataset(library, "org.test.bad_sample_keys"); // created: names are read on demand
  try {
    (void)miscounted.sample_keys();
    FAIL("three names for two samples were accepted");
  } catch (const PluginError& e) {
    CHECK(e.component_id() == "org.test.bad_sample_keys");
    CHECK(e.function() == "sample_keys");
    CHECK_MESSAGE(contains(e.what(), "(class_names.so) named its samples wrongly on split 'train': 3 names for 2 samples"),
                  e.what());
  }
}

TEST_CASE("class names must count the classes a loss declares for their field, where it declares a count") {
  const ClassNames three{"label", {"a", "b", "c"}};
  using Kind = FieldContract::Kind;
  CHECK(class_count_problem(three, {{Kind::kClassIds, "label", 3}}).empty());
  CHECK(class_count_problem(three, {{Kind::kClassIds, "label", 0}}).empty());      // a count not known to the loss
  CHECK(class_count_problem(three, {{Kind::kClassIds, "box_labels", 5}}).empty()); // another field
  CHECK(class_count_problem({}, {{Kind::kClassIds, "label", 5}}).empty());         // no names lent
  CHECK(class_count_problem(three, {{Kind::kBoxesXyxy, "boxes", 0}, {Kind::kClassIds, "label", 5}}) ==
        "3 class names for field 'label', which the loss declares to hold 5 classes");
}
