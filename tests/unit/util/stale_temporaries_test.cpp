// Security trial F14: the start-up sweep of stale temporaries removed what the host never wrote.
// `<anything>.partial-<digits>/` went whole (a thesis's `figures.partial-2023/`) and
// `.<anything>.tmp-<digits>` too (`.todo.md.tmp-4242`), three levels deep into any sub-tree of the
// run directory (run.output_dir = "."), and a planted `checkpoints` link took the sweep into its
// target. Before the fix this file's first case failed on every user file. Now only names with the
// host's random part are the host's, a partial directory must hold the prediction writer's marker,
// only the directories the host writes in are entered, and no link is followed.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tp/framework/util/stale_temporaries.h"

#include <doctest/doctest.h>

namespace {

namespace fs = std::filesystem;

// 99999999 is above any pid_max: the writer of such a name is gone.
const std::string kDead = "99999999";
const std::string kRandom = "k3J9sQx0Lm2B";  // twelve letters and digits, as create_exclusive_temporary draws

fs::path fresh(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("tp_stale_temporaries_test_" + std::to_string(::getpid())) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

fs::path put(const fs::path& file, const std::string& text = "data") {
  fs::create_directories(file.parent_path());
  std::ofstream(file) << text;
  return file;
}

bool listed(const std::vector<fs::path>& removed, const fs::path& path) {
  return std::find(removed.begin(), removed.end(), path) != removed.end();
}

}  // namespace

TEST_CASE("the sweep leaves the user's own files, named like temporaries but without the host's random part") {
  const fs::path run = fresh("user_files");
  // The trial's case: run.output_dir = "." in a home directory.
  const fs::path figure = put(run / "projects" / "thesis" / ("figures.partial-2023") / "fig1.pdf", "chapter1");
  const fs::path todo = put(run / "notes" / (".todo.md.tmp-" + kDead), "todo");
  // The same names directly in the run directory and its checkpoints/ are not the host's either.
  const fs::path photos = put(run / ("photos.partial-" + kDead) / "img1.jpg", "precious");
  const fs::path old_style = put(run / "checkpoints" / (".last.pt.tmp-" + kDead));
  const std::vector<fs::path> removed = tp::sweep_stale_temporaries(run, 3);
  CHECK(removed.empty());
  for (const fs::path& file : {figure, todo, photos, old_style}) CHECK_MESSAGE(fs::exists(file), file);
}

TEST_CASE("the sweep removes the host's temporaries of dead writers, only where the host writes them") {
  const fs::path run = fresh("host_files");
  const fs::path checkpoint_tmp = put(run / "checkpoints" / (".last.pt." + kRandom + ".tmp-" + kDead));
  const fs::path pending = put(run / "checkpoints" / (".pending-" + kDead + ".pt"));
  const fs::path plot_tmp = put(run / "plots" / (".loss.png." + kRandom + ".tmp-" + kDead));
  const fs::path link_tmp = put(run / (".best.toml." + kRandom + ".link-" + kDead));
  const fs::path csv_partial = put(run / ("p.csv." + kRandom + ".partial-" + kDead));
  const fs::path png_partial = run / ("map." + kRandom + ".partial-" + kDead);
  put(png_partial / std::string(tp::kPartialDirectoryMarker), "Written by host predict --format png");
  put(png_partial / "0.png");
  // A sweep cell (holds run.lock) is another run directory of the host's.
  const fs::path cell_tmp = put(run / "lr_0.1" / "checkpoints" / (".last.pt." + kRandom + ".tmp-" + kDead));
  put(run / "lr_0.1" / "run.lock", "");
  const fs::path live = put(run / ("q.csv." + kRandom + ".partial-" + std::to_string(::getpid())));

  // Host-like names where the host never writes them: a project's sub-tree, a partial directory
  // without the marker (or with a subdirectory), anything behind a link.
  const fs::path foreign_tree = put(run / "projects" / "site" / (".index.html." + kRandom + ".tmp-" + kDead));
  const fs::path unmarked = put(run / ("figures." + kRandom + ".partial-" + kDead) / "fig1.pdf");
  const fs::path nested = run / ("album." + kRandom + ".partial-" + kDead);
  put(nested / std::string(tp::kPartialDirectoryMarker));
  const fs::path nested_file = put(nested / "2023" / "img.jpg");
  const fs::path elsewhere = fresh("link_target");
  const fs::path behind_link = put(elsewhere / (".notes.txt." + kRandom + ".tmp-" + kDead));
  const fs::path behind_partial = put(elsewhere / ("photos." + kRandom + ".partial-" + kDead) / "img1.jpg");
  put(elsewhere / ("photos." + kRandom + ".partial-" + kDead) / std::string(tp::kPartialDirectoryMarker));
  fs::create_directory_symlink(elsewhere, run / "tensorboard");
  fs::create_symlink(behind_link, run / ("linked.txt." + kRandom + ".partial-" + kDead));

  const std::vector<fs::path> removed = tp::sweep_stale_temporaries(run, 3);
  for (const fs::path& gone : {checkpoint_tmp, pending, plot_tmp, link_tmp, csv_partial, png_partial, cell_tmp}) {
    CHECK_MESSAGE(!fs::exists(gone), gone);
    CHECK_MESSAGE(listed(removed, gone), gone);
  }
  for (const fs::path& kept : {live, foreign_tree, unmarked, nested_file, behind_link, behind_partial})
    CHECK_MESSAGE(fs::exists(kept), kept);
  CHECK(fs::is_symlink(run / ("linked.txt." + kRandom + ".partial-" + kDead)));
  CHECK(removed.size() == 7);
}

TEST_CASE("temporary_pid: the host's names with their random part, nothing else") {
  CHECK(tp::temporary_pid(".last.pt." + kRandom + ".tmp-4242") == 4242);
  CHECK(tp::temporary_pid(".best.pt." + kRandom + ".link-17") == 17);
  CHECK(tp::temporary_pid("p.csv." + kRandom + ".partial-9") == 9);
  CHECK(tp::temporary_pid(".pending-4242.pt") == 4242);
  CHECK(tp::temporary_pid(".todo.md.tmp-4242") == -1);
  CHECK(tp::temporary_pid("figures.partial-2023") == -1);
  CHECK(tp::temporary_pid("." + kRandom + ".tmp-5") == -1);          // no target name before the random part
  CHECK(tp::temporary_pid(".x.k3J9sQx0Lm2_.tmp-5") == -1);           // not twelve letters and digits
  CHECK(tp::temporary_pid("last.pt." + kRandom + ".tmp-4242") == -1); // a file temporary is hidden
  CHECK(tp::temporary_pid("last.pt") == -1);
}
