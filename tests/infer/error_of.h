// What the inference library's tests catch: the message of a tp::infer::Error.
#pragma once

#include <string>

#include "tp/infer/model.h"

namespace tp::test {

/// The message of what `body` throws as tp::infer::Error ("" when it does not throw).
template <class Body>
std::string error_of(Body&& body) {
  try {
    body();
  } catch (const tp::infer::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace tp::test
