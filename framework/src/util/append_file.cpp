#include "tp/framework/util/append_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "tp/framework/error.h"
#include "tp/framework/util/regular_file.h"

namespace tp {
int open_for_appending(const std::filesystem::path& file) {
  const std::string name = file.string();
  const std::string remedy = " Remove it, or give another output directory.";
  const int fd = ::open(name.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0666);
  if (fd < 0) {
    const int error = errno;
    if (error == ELOOP)
      throw Error(name + " is a symbolic link; the run never appends through a link, which could point at any "
                  "file (a planted link would make the run write into it)." + remedy);
    if (error == ENXIO)  // a FIFO nobody reads: a blocking open would wait for a reader for good
      throw Error(name + " is a FIFO, not a regular file; the run appends only to a regular file." + remedy);
    throw Error("cannot open " + name + " for appending: " + std::strerror(error) + ".");
  }
  struct stat info {};
  std::string problem;
  if (::fstat(fd, &info) != 0)
    problem = "cannot be examined (" + std::string(std::strerror(errno)) + ")";
  else if (!S_ISREG(info.st_mode))
    problem = std::string("is ") + file_kind(info.st_mode) + ", not a regular file; the run appends only to a regular file";
  else if (info.st_uid != ::geteuid())
    problem = "belongs to uid " + std::to_string(info.st_uid) + ", not to you (uid " + std::to_string(::geteuid()) +
              "): whoever made it can read everything the run writes to it";
  if (problem.empty() && ::fcntl(fd, F_SETFL, O_WRONLY | O_APPEND) != 0)
    problem = "cannot be switched to blocking writes (" + std::string(std::strerror(errno)) + ")";
  if (!problem.empty()) {
    ::close(fd);
    throw Error(name + " " + problem + "." + remedy);
  }
  return fd;
}

}  // namespace tp
