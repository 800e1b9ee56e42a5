#include "tp/framework/util/write_error.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace tp {
namespace {

// "uid 1001 (alice)", or "uid 1001" where the password database has no name for it.
std::string user_text(uid_t uid) {
  std::string text = "uid " + std::to_string(uid);
  std::vector<char> buffer(16384);
  struct passwd entry {};
  struct passwd* found = nullptr;
  if (::getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr &&
      found->pw_name != nullptr)
    text += std::string(" (") + found->pw_name + ")";
  return text;
}

}  // namespace

std::string describe_write_error(int error) {
  std::string text = std::strerror(error);
  text += ".";
  if (error == ENOSPC)
    text += " The disk is full: free space or point run.output_dir elsewhere.";
  else if (error == EDQUOT)
    text += " The disk quota is full: free space within your quota or point run.output_dir elsewhere.";
  else if (error == EFBIG)
    text += " The file size limit was reached (disk quota full, `ulimit -f`, or the file system's maximum file "
            "size): raise the limit or point run.output_dir elsewhere.";
  else if (error == EACCES)
    text += " Check the directory's permissions.";
  return text;
}

std::string describe_open_error(const std::filesystem::path& file, int error) {
  struct stat info {};
  if ((error != EACCES && error != EPERM) || ::lstat(file.c_str(), &info) != 0) return describe_write_error(error);
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(info.st_mode & 07777));
  return std::string(std::strerror(error)) + ": the file exists, owned by " + user_text(info.st_uid) + ", group " +
         std::to_string(info.st_gid) + ", mode " + mode + ", which does not let you (" + user_text(::geteuid()) +
         ") write to it. The host creates files 0666 less the umask of whoever runs it: in a directory a team "
         "shares, run with umask 002, and ask the file's owner to `chmod g+w` the files created before.";
}

}  // namespace tp
