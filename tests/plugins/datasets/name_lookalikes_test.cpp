// Class folders whose names print alike but differ in their bytes (data trial F9): a val folder
// copied from macOS holds 'café' and 'Äpfel' decomposed (NFD), and the refusal listed "missing
// here: 'café', 'Äpfel'; not in root: 'Äpfel', 'café'", which reads the same on any terminal.
// Now it spells each pair's code points and says how to rename. Folders of empty .jpg files (the
// listing never opens them): well under a second.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "name_lookalikes.h"
#include "split_listing.h"
#include "tp/cpp/guard.h"

#include <doctest/doctest.h>

namespace {

namespace fs = std::filesystem;
namespace ifo = tp::image_folder;

const std::string kCafeComposed = "caf\xC3\xA9";      // U+00E9
const std::string kCafeDecomposed = "cafe\xCC\x81";   // e, U+0301
const std::string kApfelComposed = "\xC3\x84pfel";    // U+00C4
const std::string kApfelDecomposed = "A\xCC\x88pfel"; // A, U+0308

/// `<dir>/<class>/a.jpg` for each class (empty files: the listing only names them).
fs::path class_folders(const fs::path& dir, const std::vector<std::string>& classes) {
  fs::remove_all(dir);
  for (const std::string& name : classes) {
    fs::create_directories(dir / name);
    std::ofstream(dir / name / "a.jpg");
  }
  return dir;
}

}  // namespace

TEST_CASE("a val folder with decomposed (NFD) class names is refused with the code points and the convmv line") {
  const fs::path base = fs::temp_directory_path() / "tp_name_lookalikes_test";
  ifo::ListingKeys keys;
  keys.root = class_folders(base / "train", {"bird", kCafeComposed, kApfelComposed}).string();
  keys.val_root = class_folders(base / "val", {"bird", kCafeDecomposed, kApfelDecomposed}).string();
  keys.extensions = {".jpg"};
  std::string message;
  try {
    (void)ifo::listing_of_split(keys, "val");
  } catch (const tp::cpp::Failure& e) {
    message = e.what();
  }
  INFO(message);
  CHECK(message.find("missing here: ") != std::string::npos);
  CHECK(message.find("'caf\xC3\xA9' is caf<U+00E9> in root and cafe<U+0301> in val_root '" + keys.val_root + "'") !=
        std::string::npos);
  CHECK(message.find("is <U+00C4>pfel in root and A<U+0308>pfel in val_root") != std::string::npos);
  CHECK(message.find("decomposed (NFD) Unicode") != std::string::npos);
  CHECK(message.find("convmv -f utf8 -t utf8 --nfc -r --notest '" + keys.val_root + "'") != std::string::npos);

  // A class truly missing gets no such note; a zero-width space is named as invisible.
  CHECK(ifo::lookalike_note({"zebra"}, {"lion"}, "val_root 'v'", "r", "v").empty());
  const std::string invisible = ifo::lookalike_note({"dog"}, {"dog\xE2\x80\x8B"}, "val_root 'v'", "r", "v");
  CHECK(invisible.find("'dog' is dog in root and dog<U+200B> in val_root 'v'") != std::string::npos);
  CHECK(invisible.find("remove them from the folder names") != std::string::npos);
  CHECK(ifo::spelled_code_points("a\xFF" "b") == "a<0xFF>b");
  fs::remove_all(base);
}
