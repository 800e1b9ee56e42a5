// ConfigView: the tp_config_t getters a plugin's create() reads its table with.
#include <cstring>

#include "tp/framework/config/config_view.h"

#include "unit/config/config_test_util.h"

namespace {

struct Sink {
  int calls = 0;
  tp_status last_code = TP_OK;
  std::string last_message;
  tp::ConfigView::FailFn fn() {
    return [this](tp_status code, const std::string& message) {
      ++calls;
      last_code = code;
      last_message = message;
      return code;
    };
  }
};

toml::table sample_table() {
  return toml::parse(std::string_view(
      "flag = true\nwidth = 32\nscale = 0.5\nwhole = 2\nact = \"relu\"\n"
      "sizes = [3, 4]\ngains = [1, 0.25]\nnames = [\"a\", \"bc\"]\n"));
}

TEST_CASE("ConfigView getters read every type") {
  Sink sink;
  const tp::ConfigView view(sample_table(), "org.test.model", sink.fn());
  const tp_config_t* cfg = view.view();
  REQUIRE(cfg->struct_size == sizeof(tp_config_t));

  bool flag = false;
  CHECK(cfg->get_bool(cfg->self, "flag", &flag) == TP_OK);
  CHECK(flag);
  int64_t width = 0;
  CHECK(cfg->get_int(cfg->self, "width", &width) == TP_OK);
  CHECK(width == 32);
  double scale = 0;
  CHECK(cfg->get_float(cfg->self, "scale", &scale) == TP_OK);
  CHECK(scale == 0.5);
  double whole = 0;
  CHECK(cfg->get_float(cfg->self, "whole", &whole) == TP_OK); // integers are valid floats
  CHECK(whole == 2.0);
  const char* act = nullptr;
  CHECK(cfg->get_string(cfg->self, "act", &act) == TP_OK);
  REQUIRE(act != nullptr);
  CHECK(std::strcmp(act, "relu") == 0);
  const char* act_again = nullptr;
  cfg->get_string(cfg->self, "act", &act_again);
  CHECK(act_again == act); // a pointer into the view's table, stable while the view lives

  uint32_t count = 0;
  CHECK(cfg->get_array_size(cfg->self, "sizes", &count) == TP_OK);
  CHECK(count == 2);
  int64_t size = 0;
  CHECK(cfg->get_int_at(cfg->self, "sizes", 1, &size) == TP_OK);
  CHECK(size == 4);
  double gain = 0;
  CHECK(cfg->get_float_at(cfg->self, "gains", 0, &gain) == TP_OK);
  CHECK(gain == 1.0);
  const char* name = nullptr;
  CHECK(cfg->get_string_at(cfg->self, "names", 1, &name) == TP_OK);
  CHECK(std::strcmp(name, "bc") == 0);
  CHECK(sink.calls == 0);
}

TEST_CASE("ConfigView getters fail through the sink") {
  Sink sink;
  const tp::ConfigView view(sample_table(), "org.test.model", sink.fn());
  const tp_config_t* cfg = view.view();

  int64_t value = 0;
  CHECK(cfg->get_int(cfg->self, "depth", &value) == TP_ERR_CONFIG);
  CHECK(sink.calls == 1);
  CHECK(sink.last_code == TP_ERR_CONFIG);
  TP_CHECK_CONTAINS(sink.last_message, "org.test.model");
  TP_CHECK_CONTAINS(sink.last_message, "\"depth\"");
  TP_CHECK_CONTAINS(sink.last_message, "not declared");

  CHECK(cfg->get_int(cfg->self, "scale", &value) == TP_ERR_CONFIG);
  TP_CHECK_CONTAINS(sink.last_message, "a float (0.5), not an integer");
  bool flag = false;
  CHECK(cfg->get_bool(cfg->self, "width", &flag) == TP_ERR_CONFIG);
  double number = 0;
  CHECK(cfg->get_float(cfg->self, "act", &number) == TP_ERR_CONFIG);
  const char* text = nullptr;
  CHECK(cfg->get_string(cfg->self, "width", &text) == TP_ERR_CONFIG);
  uint32_t count = 0;
  CHECK(cfg->get_array_size(cfg->self, "width", &count) == TP_ERR_CONFIG);
  CHECK(cfg->get_int_at(cfg->self, "names", 0, &value) == TP_ERR_CONFIG);
  CHECK(cfg->get_string_at(cfg->self, "act", 0, &text) == TP_ERR_CONFIG);
  CHECK(cfg->get_float_at(cfg->self, "missing", 0, &number) == TP_ERR_CONFIG);
  CHECK(sink.calls == 9);

  CHECK(cfg->get_int_at(cfg->self, "sizes", 2, &value) == TP_ERR_OUT_OF_RANGE);
  TP_CHECK_CONTAINS(sink.last_message, "index past the end");
  CHECK(cfg->get_int(cfg->self, nullptr, &value) == TP_ERR_INVALID_ARGUMENT);
  CHECK(cfg->get_int(cfg->self, "width", nullptr) == TP_ERR_INVALID_ARGUMENT);
  CHECK(cfg->get_int(nullptr, "width", &value) == TP_ERR_INVALID_ARGUMENT);
}

TEST_CASE("ConfigView turns a throwing sink into TP_ERR_INTERNAL") {
  const tp::ConfigView view(sample_table(), "org.test.model",
                            [](tp_status, const std::string&) -> tp_status { throw 1; });
  int64_t value = 0;
  CHECK(view.view()->get_int(view.view()->self, "nope", &value) == TP_ERR_INTERNAL);
}

}  // namespace
