// Where run_encoded puts a batch's image bytes so that the dataset reads them as the files they
// are: a directory only this user can enter, removed with its files.
#pragma once

#include <filesystem>

namespace tp::infer::detail {

/// A new directory of mkdtemp's under TMPDIR (mode 0700: no other user reads the caller's images),
/// removed with its files by the destructor (a failure to remove it is ignored: a leftover in
/// TMPDIR is no reason to fail a finished batch). The constructor throws tp::infer::Error naming
/// TMPDIR when there is no temporary directory or it cannot create one there.
class PrivateDirectory {
 public:
  PrivateDirectory();
  ~PrivateDirectory();
  PrivateDirectory(const PrivateDirectory&) = delete;
  PrivateDirectory& operator=(const PrivateDirectory&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace tp::infer::detail
