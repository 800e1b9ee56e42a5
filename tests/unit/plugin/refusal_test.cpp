// One refusal per broken rule. Each fixture is correct except for one defect
// (tests/fixtures/bad_plugins/fixture_plugin.h), so each message must name the file and that
// defect: a user with twenty plugins on the search path needs to know which one to fix, and how.
#include "loader_test_util.h"
#include "plugin/load_failure.h"
#include "tp/version.h"
#include "support/test_paths.h"

namespace {

using namespace tp;
using namespace tp::test;

/// Checks that `message` names the fixture file and each of `reasons`.
void check_names(const std::string& message, const std::filesystem::path& file,
                 std::initializer_list<std::string> reasons) {
  CHECK_MESSAGE(contains(message, file.string()), "the message names the file: " << message);
  for (const std::string& reason : reasons) CHECK_MESSAGE(contains(message, reason), "'" << reason << "' in: " << message);
}

TEST_CASE("a plugin built for another ABI major is refused before it runs (PLG-3)") {
  const std::string this_host = "implements ABI " + std::to_string(TP_ABI_MAJOR) + "." + std::to_string(TP_ABI_MINOR);
  check_names(library_refusal("abi_major"), fixture("abi_major"), {"ABI 2.0", "major", this_host});
}

TEST_CASE("a plugin built for a newer ABI minor is refused (PLG-3)") {
  check_names(library_refusal("abi_minor"), fixture("abi_minor"), {"ABI 1.99", "newer"});
}

TEST_CASE("a library without tp_entry is not a plugin") {
  check_names(library_refusal("no_entry"), fixture("no_entry"), {"tp_entry", "not a torchhost plugin"});
}

TEST_CASE("an undefined symbol is refused with advice that fits it: LibTorch's, or a function nothing defines") {
  // Before, both read "...: Bad file descriptor. An undefined symbol usually means it was built
  // against another LibTorch": boost's stale errno, and LibTorch blamed for any symbol.
  const std::string plain = library_refusal("undefined_symbol");
  check_names(plain, fixture("undefined_symbol"),
              {"undefined symbol: tp_fixture_function_nobody_defines", "no loaded library defines",
               "ldd -r " + fixture("undefined_symbol").string()});
  CHECK_FALSE(contains(plain, "LibTorch"));
  CHECK_FALSE(contains(plain, "Bad file descriptor"));
  CHECK_FALSE(contains(plain, "boost::dll"));
  const std::string torch = library_refusal("undefined_torch");
  check_names(torch, fixture("undefined_torch"),
              {"undefined symbol: _ZN3c1031tp_fixture_gone_in_this_versionEi "
               "(c10::tp_fixture_gone_in_this_version(int))",
               "another LibTorch version", "or another LibTorch was loaded first"});
  CHECK_FALSE(contains(torch, "Bad file descriptor"));
  CHECK_FALSE(contains(torch, "no loaded library defines"));
}

TEST_CASE("a plugin that pulls in another LibTorch is named built against another LibTorch, not unlinked") {
  // Serving trial F4: resnet.so built against a Python wheel's LibTorch failed inside that wheel's
  // libtorch_nvshmem.so on a c10d:: symbol, and was told "a library it needs was not linked into it".
  const std::string boost = "boost::dll::shared_library::load() failed (dlerror system message: ";
  const std::string wheel = "/elsewhere/venv/lib/python3.11/site-packages/torch/lib";
  const std::string other = tp::detail::load_failure_message(
      "pd/resnet.so", boost + wheel + "/libtorch_nvshmem.so: undefined symbol: _ZNK4c10d7Backend15decref_pyobjectEv): "
                      "Bad file descriptor");
  INFO(other);
  CHECK(contains(other, "(c10d::Backend::decref_pyobject() const)"));
  CHECK(contains(other, "is LibTorch's own, from " + wheel));
  CHECK(contains(other, "built against another LibTorch"));
  CHECK_FALSE(contains(other, "no loaded library defines"));
  // Any symbol, once the failing object is another directory's LibTorch library.
  const std::string plain =
      tp::detail::load_failure_message("pd/resnet.so", boost + wheel + "/libtorch_cpu.so: undefined symbol: _Z3foov): x");
  CHECK(contains(plain, "built against another LibTorch"));
  // A c10d:: symbol the plugin itself lacks: LibTorch's, as c10:: is.
  const std::string own = tp::detail::load_failure_message(
      "pd/resnet.so", boost + "pd/resnet.so: undefined symbol: _ZNK4c10d7Backend15decref_pyobjectEv): x");
  CHECK(contains(own, "The symbol is LibTorch's"));
  CHECK_FALSE(contains(own, "no loaded library defines"));
}

TEST_CASE("a tp_entry whose struct_size is too small is refused (PLG-2)") {
  check_names(library_refusal("small_struct"), fixture("small_struct"), {"struct_size", "32"});
}

TEST_CASE("a failing init() is refused with the plugin's own message (PLG-7)") {
  check_names(library_refusal("init_fails"), fixture("init_fails"),
              {"init()", "TP_ERR_IO", "license file missing"});
}

TEST_CASE("a schema whose default does not parse as its type is refused at load time (PLG-6)") {
  check_names(library_refusal("bad_schema"), fixture("bad_schema"), {"org.test.bad_schema", "max_steps", "abc"});
}

TEST_CASE("a component id that is not reverse-DNS is refused") {
  check_names(library_refusal("bad_id"), fixture("bad_id"), {"NoDots", "reverse-DNS"});
}

TEST_CASE("a dataset declaring Tier T is refused") {
  check_names(library_refusal("tier_mismatch"), fixture("tier_mismatch"),
              {"org.test.tier_mismatch", "dataset", "tier S"});
}

TEST_CASE("a NULL required function is refused at registration, not at first call") {
  check_names(library_refusal("missing_fn"), fixture("missing_fn"), {"org.test.missing_fn", "get_sample", "NULL"});
}

TEST_CASE("a Tier T build fingerprint that differs from the host's is refused") {
  const std::string message = library_refusal("fingerprint");
  check_names(message, fixture("fingerprint"), {"LibTorch 1.0.0", "Tier T"});
  // The user must see both sides to know what to rebuild against.
  CHECK_MESSAGE(contains(message, BuildFingerprint::host().describe()), message);
}

TEST_CASE("a plugin whose tp_entry.name differs from its file name is refused by the registry") {
  const std::filesystem::path file = fixture("name_mismatch");
  TestHost host;
  Registry registry(host.services);
  const std::string message = load_error([&] { registry.load_search_path({{file.parent_path(), "--plugin-dir"}}); });
  check_names(message, file, {"some_other_name", "name_mismatch.so"});
  CHECK(registry.all().empty());
}

TEST_CASE("one component id in two files of one directory is an error naming both files") {
  TestHost host;
  Registry registry(host.services);
  const std::string message =
      load_error([&] { registry.load_search_path({{fixture_dir("duplicate"), "plugins.dirs"}}); });
  check_names(message, fixture("duplicate_a", "duplicate"), {"org.test.dup", "twice"});
  check_names(message, fixture("duplicate_b", "duplicate"), {});
}

TEST_CASE("a refused library leaves the registry as it was") {
  TestHost host;
  Registry registry(host.services);
  registry.load_search_path({{fixture_dir("good_callback"), "--plugin-dir"}});
  load_error([&] { registry.load_search_path({{fixture_dir("abi_major"), "--plugin-dir"}}); });
  REQUIRE(registry.all().size() == 1);
  CHECK(registry.all()[0].info->id == "org.test.good_callback");
}

TEST_CASE("a run's refusal of an unusable file says every file is loaded and how out; the listing goes on past it") {
  TestHost host;
  Registry strict(host.services);
  const std::string message = load_error([&] {
    strict.load_search_path({{fixture_dir("good_callback"), "--plugin-dir"}, {fixture_dir("abi_major"), "--plugin-dir"}});
  });
  check_names(message, fixture("abi_major"), {"ABI 2.0", "Every .so in a plugin directory is loaded", "move it out of",
                                              fixture_dir("abi_major").string() + " (from --plugin-dir)",
                                              "host plugins list"});
  Registry listing(host.services);
  listing.list_unusable_files(true);
  listing.load_search_path({{fixture_dir("abi_major"), "--plugin-dir"}, {fixture_dir("good_callback"), "--plugin-dir"}});
  REQUIRE(listing.all().size() == 1); // the good library after the bad one still loads
  CHECK(listing.all()[0].info->id == "org.test.good_callback");
  REQUIRE(listing.unusable().size() == 1);
  CHECK(listing.unusable()[0].file == fixture("abi_major"));
  CHECK(listing.unusable()[0].reason.find("ABI 2.0") != std::string::npos);
}

TEST_CASE("no fixture is built into the strict plugin directory") {
  // The host refuses a whole run for one bad library, so a fixture in build/plugins would break
  // every test that loads the built-in plugins.
  const std::filesystem::path plugins(tp::test::plugin_dir());
  for (const char* name : {"abi_major", "abi_minor", "no_entry", "small_struct", "init_fails", "bad_schema", "bad_id",
                           "tier_mismatch", "missing_fn", "fingerprint", "name_mismatch", "duplicate_a",
                           "duplicate_b", "throws", "good_callback"})
    CHECK_MESSAGE(!std::filesystem::exists(plugins / (std::string(name) + ".so")), name << " leaked into " << plugins);
}

}  // namespace
