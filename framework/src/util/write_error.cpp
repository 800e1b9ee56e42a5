#include "tp/framework/util/write_error.h"

#include <cerrno>
#include <cstring>

namespace tp {

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

}  // namespace tp
