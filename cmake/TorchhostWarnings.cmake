# tp_enable_warnings(<target>): the warning set of all our own targets (-Werror when
# TP_WARNINGS_AS_ERRORS). Third-party headers come in as SYSTEM includes, so they do not trip it.
# GCC 12's -Warray-bounds reports a memcpy "out of the bounds [0, 32]" of a std::string inside
# libstdc++'s own operator+ (a known false positive of its flow analysis at -O2); with the
# precompiled LibTorch headers it fires in dozens of test files. It stays a warning, not an error.
function(tp_enable_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wno-unused-parameter
    $<$<BOOL:${TP_WARNINGS_AS_ERRORS}>:-Werror>
    $<$<AND:$<BOOL:${TP_WARNINGS_AS_ERRORS}>,$<COMPILE_LANG_AND_ID:CXX,GNU>>:-Wno-error=array-bounds>)
endfunction()

# TP_SANITIZE (the `sanitize` preset, scripts/sanitize): AddressSanitizer (with LeakSanitizer) and
# UndefinedBehaviorSanitizer on every target this project compiles: framework, host, plugins,
# fixtures, tests. LibTorch, Boost, OpenCV and the other prebuilt libraries stay uninstrumented;
# ASan still sees their heap through its malloc interposer, so their allocations count for leak
# checking (tests/sanitize/lsan.supp names the ones that are theirs by design). UB aborts at the
# first report (-fno-sanitize-recover) so ctest fails instead of printing and passing.
# Cost: about 2x slower code and 2-3x the memory; a separate build directory (build-sanitize).
# The preset compiles at -O1 -g1 (line tables are all ASan's reports need): measured on a LibTorch
# test TU, 21 s against 37 s at the default -O2 -g, i.e. no dearer than the normal build.
option(TP_SANITIZE "Build with -fsanitize=address,undefined (ASan + LSan + UBSan)" OFF)
if(TP_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
  add_compile_definitions(TP_SANITIZE=1)
  # GCC's flow-based -Wstringop-overflow sees the paths ASan's instrumentation adds at -O1 and
  # reports impossible sizes (a resize by size() - 25 "of 18446744073709551590 bytes"); it stays a
  # warning here and an error in the default build, which is the warnings gate.
  add_compile_options($<$<COMPILE_LANG_AND_ID:CXX,GNU>:-Wno-error=stringop-overflow>)
  # Likewise -Wmaybe-uninitialized: at -O1 with ASan, GCC 12 reports LibTorch's own
  # intrusive_ptr inside the std::optional<at::Generator> default argument of bernoulli_ as
  # "may be used uninitialized" (tp/cpp/model_layers.h's stochastic_depth, in every zoo plugin);
  # the default -O2 build compiles the same code without it and stays the gate.
  add_compile_options($<$<COMPILE_LANG_AND_ID:CXX,GNU>:-Wno-error=maybe-uninitialized>)
endif()
