// tp::infer::Error's destructor, out of line so that the type information a caller's catch
// compares lives in the library (model.h).
#include "tp/infer/model.h"

namespace tp::infer {

Error::~Error() = default;

}  // namespace tp::infer
