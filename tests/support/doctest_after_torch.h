// doctest's CHECK after LibTorch's: c10's logging header defines a CHECK macro of its own. Include
// this after the LibTorch headers, instead of <doctest/doctest.h>. No include guard, on purpose:
// in a unity build (TP_UNITY) several test files share one translation unit, and each must end
// with doctest's CHECK however many LibTorch headers the files before it included.
#undef CHECK
#include <doctest/doctest.h>
#ifndef CHECK
#define CHECK(...) DOCTEST_CHECK(__VA_ARGS__)  // doctest.h was included before, and CHECK undefined since
#endif
