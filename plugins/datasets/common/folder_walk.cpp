#include "folder_walk.h"

#include <algorithm>
#include <system_error>

#include "tp/cpp/guard.h"

namespace tp::datasets {

namespace fs = std::filesystem;

FolderWalk walk_folder(const fs::path& dir, const char* component) {
  std::error_code error;
  const auto unreadable = [&](const fs::path& where) {
    return tp::cpp::Failure(TP_ERR_IO, std::string(component) + ": cannot read the directory '" + where.string() +
                                           "': " + error.message());
  };
  FolderWalk out;
  // The real paths of the directories the walk is inside, by depth ([0]: `dir`): a link to one of
  // them is a loop. A real path, so `a/x -> ../b` and `b/y -> ../a` are seen to meet.
  std::vector<fs::path> inside{fs::canonical(dir, error)};
  if (error) throw unreadable(dir);
  out.directories.push_back(dir.string());
  fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink, error);
  if (error) throw unreadable(dir);
  for (const fs::recursive_directory_iterator end; it != end;) {
    const fs::path path = it->path();
    bool enter = false;
    std::error_code kind_error;
    if (it->is_directory(kind_error)) {
      inside.resize(static_cast<std::size_t>(it.depth()) + 1);
      fs::path real = fs::canonical(path, kind_error);
      if (kind_error) {
        // Gone between the listing and now: nothing to walk.
      } else if (std::find(inside.begin(), inside.end(), real) != inside.end()) {
        out.loops.push_back(path.lexically_relative(dir).generic_string());
      } else {
        inside.push_back(std::move(real));
        out.directories.push_back(path.string());
        enter = true;
      }
    } else if (it->is_regular_file(kind_error)) {
      out.files.push_back(path);
    }
    // Each entry decides whether it is entered: left to the iterator, a link whose target cannot
    // be read (ELOOP, a dangling link) can end the walk with an error instead of being skipped.
    if (!enter) it.disable_recursion_pending();
    it.increment(error);
    if (error) throw unreadable(enter ? path : path.parent_path());
  }
  return out;
}

}  // namespace tp::datasets
