// Calls std::filesystem::remove_all on a folder of three entries it makes and says which
// remove_all ran: libstdc++'s removes them, exported_filesystem.so's copy only prints.
#include <cstdio>
#include <filesystem>
#include <fstream>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir / "sub");
  std::ofstream(dir / "file") << "x";
  const auto removed = std::filesystem::remove_all(dir);
  if (std::filesystem::exists(dir)) return 1;
  std::printf("libstdc++'s remove_all removed %ju entries\n", static_cast<std::uintmax_t>(removed));
  return 0;
}
