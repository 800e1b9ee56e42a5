// The files components read through path keys (TP_CFG_PATH) in the provenance (docs/hardening.md,
// "Provenance"): runtime.toml and the checkpoints record each one's path, size and SHA-256, and
// --resume warns, naming the key, the component and the file, when its contents changed since the
// checkpoint was written (distillation trial F5: a TorchScript teacher replaced between a stop and
// --resume went unnoticed). Here the file is org.torchhost.csv's `path`, the training split.
#include <toml++/toml.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tp/framework/checkpoint/checkpoint.h"

#include "engine/setup/provenance.h"

#include "integration/host_runner.h"
#include "support/test_paths.h"

#include <doctest/doctest.h>

namespace {

namespace fs = std::filesystem;

/// 48 rows of four features and a class in {0, 1, 2}; `scale` changes the values, not the count.
void write_csv(const fs::path& file, double scale) {
  std::ofstream out(file);
  out << "a,b,c,d,label\n";
  for (int i = 0; i < 48; ++i)
    out << scale * (i % 7) << "," << scale * (i % 5) << "," << (i % 3) * 0.5 << "," << i * 0.01 << "," << i % 3 << "\n";
}

void write_config(const fs::path& dir) {
  std::ofstream(dir / "run.toml") << R"([run]
seed = 3
device = "cpu"
[train]
epochs = 1
batch_size = 16
[optim]
name = "sgd"
lr = 0.01
[eval]
strategy = "no"
sanity_batches = 0
[progress]
mode = "off"
[data]
num_workers = 0
val_from_train = false
[data.train]
component = "org.torchhost.csv"
path = "data.csv"
[model]
component = "org.torchhost.mlp"
input = "features"
in_features = 4
hidden = []
num_classes = 3
[loss]
component = "org.torchhost.cross_entropy"
target = "target"
)";
}

std::string sha256_of_python(const fs::path& file) {
  const auto run = tp::test::run_shell(std::string("'") + tp::test::python() +
                                       "' -c 'import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],\"rb\").read()).hexdigest())' '" +
                                       file.string() + "'");
  REQUIRE(run.exit_code == 0);
  return run.output.substr(0, 64);
}

}  // namespace

TEST_CASE("--resume warns when a file a path key names changed since the checkpoint; an unchanged one is silent") {
  const auto dir = tp::test::fresh_dir("input_files_resume");
  write_csv(dir / "data.csv", 1.0);
  write_config(dir);
  const std::string run = "--config '" + (dir / "run.toml").string() + "' --output-dir '" + (dir / "run").string() + "' ";
  const auto first = tp::test::run_host(run);
  INFO(first.output);
  REQUIRE(first.exit_code == 0);

  // Recorded in runtime.toml and the checkpoint: the resolved path, size and hashlib's SHA-256.
  const std::string hash = sha256_of_python(dir / "data.csv");
  const toml::table runtime = toml::parse_file((dir / "run" / "runtime.toml").string());
  const toml::table saved = toml::parse(tp::load_checkpoint(dir / "run" / "checkpoints" / "last.pt").provenance_toml);
  for (const toml::table* record : {&runtime, &saved}) {
    const toml::array* files = record->at_path("provenance.input_files").as_array();
    REQUIRE(files != nullptr);
    REQUIRE(files->size() == 1);
    const toml::table& file = *(*files)[0].as_table();
    CHECK(file["key"].value_or(std::string()) == "data.train.path");
    CHECK(file["component"].value_or(std::string()) == "org.torchhost.csv");
    CHECK(file["path"].value_or(std::string()) == (dir / "data.csv").string());
    CHECK(file["size"].value_or(int64_t{-1}) == static_cast<int64_t>(fs::file_size(dir / "data.csv")));
    CHECK(file["sha256"].value_or(std::string()) == hash);
  }

  // The same file: no warning.
  const auto same = tp::test::run_host(run + "--set train.epochs=2 --resume auto");
  INFO(same.output);
  REQUIRE(same.exit_code == 0);
  CHECK_FALSE(tp::test::contains(same.output, "changed since the checkpoint"));
  CHECK_FALSE(tp::test::contains(same.output, "is gone"));

  // Other values, the same number of rows: the resume goes on, but says so, naming key and file.
  write_csv(dir / "data.csv", -2.0);
  const auto changed = tp::test::run_host(run + "--set train.epochs=3 --resume auto");
  INFO(changed.output);
  REQUIRE(changed.exit_code == 0);
  const std::string warning = "--resume: the file data.train.path (org.torchhost.csv) reads, " +
                              (dir / "data.csv").string() + " changed since the checkpoint was written: SHA-256 " +
                              hash.substr(0, 12) + "...";
  CHECK(tp::test::contains(changed.output, warning));
  CHECK(tp::test::contains(changed.output, "put back the file the checkpoint was written with"));
  // The resumed run records the new file, so resuming it again is silent.
  const auto again = tp::test::run_host(run + "--set train.epochs=4 --resume auto");
  INFO(again.output);
  REQUIRE(again.exit_code == 0);
  CHECK_FALSE(tp::test::contains(again.output, "changed since the checkpoint"));
}

TEST_CASE("changed_input_files: a file gone, a file over the hash limit by size and time, old checkpoints silent") {
  const std::string recorded = R"([provenance]
[[provenance.input_files]]
key = "model.teacher"
component = "org.trial.kd_model"
path = "/data/teacher\u001b[2J.pt"
size = 100
mtime_ns = 5
sha256 = "29ffe5d3d2f1aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
[[provenance.input_files]]
key = "data.train.path"
component = "org.torchhost.csv"
path = "/data/big.csv"
size = 2000000000
mtime_ns = 7
sha256 = ""
)";
  tp::Provenance now;
  std::vector<std::string> warnings = tp::changed_input_files(recorded, now);
  REQUIRE(warnings.size() == 2);
  CHECK(tp::test::contains(warnings[0], "model.teacher (org.trial.kd_model) read when the checkpoint was written, "
                                        "/data/teacher\\u001B[2J.pt (SHA-256 29ffe5d3d2f1..., 100 bytes), is gone"));
  // The big file, same size and time: no change; another time: a change, by size and time.
  now.input_files.push_back({"model.teacher", "org.trial.kd_model", "/data/teacher.pt", 100,
                             "29ffe5d3d2f1aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 999});
  now.input_files.push_back({"data.train.path", "org.torchhost.csv", "/data/big.csv", 2000000000, "", 7});
  CHECK(tp::changed_input_files(recorded, now).empty()); // moved with the same bytes: no change
  now.input_files[1].mtime_ns = 8;
  warnings = tp::changed_input_files(recorded, now);
  REQUIRE(warnings.size() == 1);
  CHECK(tp::test::contains(warnings[0], "data.train.path (org.torchhost.csv) reads, /data/big.csv changed"));
  CHECK(tp::test::contains(warnings[0], "not hashed: over 1 GiB"));
  // A checkpoint from elsewhere (--resume FILE): its values are shown redacted and cut to 4 KiB.
  const std::string hostile = "[[provenance.input_files]]\nkey = \"model.teacher\"\ncomponent = \"x\"\n"
                              "path = \"http://alice:secret@h/" + std::string(10000, 'a') + "\"\nsize = 1\n";
  warnings = tp::changed_input_files(hostile, tp::Provenance{});
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].find("secret") == std::string::npos);
  CHECK(warnings[0].size() < 6000);
  // A checkpoint from before the record, or without provenance: nothing.
  CHECK(tp::changed_input_files("[provenance]\nhost_version = \"x\"\n", now).empty());
  CHECK(tp::changed_input_files("", now).empty());
}
