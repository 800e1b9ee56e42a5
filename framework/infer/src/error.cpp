// tp::infer::Error's constructors and destructor, out of line so that the type information a
// caller's catch compares lives in the library (model.h).
#include "tp/infer/model.h"

namespace tp::infer {

Error::Error(const std::string& message, Kind kind) : std::runtime_error(message), kind_(kind) {}
Error::Error(const char* message, Kind kind) : std::runtime_error(message), kind_(kind) {}
Error::~Error() = default;

}  // namespace tp::infer
