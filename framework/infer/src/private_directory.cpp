#include "private_directory.h"

#include <stdlib.h> // mkdtemp

#include <cstdlib>
#include <string>
#include <system_error>

#include "tp/infer/model.h"

namespace tp::infer::detail {

PrivateDirectory::PrivateDirectory() {
  std::error_code missing;
  const std::filesystem::path parent = std::filesystem::temp_directory_path(missing);
  if (missing) {
    const char* tmpdir = std::getenv("TMPDIR");
    throw Error(std::string("tp::infer: no temporary directory for encoded images: TMPDIR is '") +
                (tmpdir != nullptr ? tmpdir : "") + "', which is not a directory (" + missing.message() +
                "); set TMPDIR to a writable directory, or pass the images as files.",
                Error::Kind::Setup);
  }
  std::string name = (parent / "tp_infer.XXXXXX").string();
  if (::mkdtemp(name.data()) == nullptr)
    throw Error("tp::infer: cannot create a temporary directory under " + parent.string() +
                " for encoded images; set TMPDIR to a writable directory, or pass the images as files.",
                Error::Kind::Setup);
  path_ = name;
}

PrivateDirectory::~PrivateDirectory() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace tp::infer::detail
