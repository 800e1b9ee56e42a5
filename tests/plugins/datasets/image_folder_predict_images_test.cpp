// End to end (issue 60, part 3): `host predict --images DIR|LIST` on new, unlabelled files of a
// tiny image_folder run. The files are read with the run's evaluation table (image_folder's
// `files` key), so their outputs equal `--split val`'s for the same files bit for bit; rows carry
// the file's path and its class name, no label; bad input stops with exit 2 and a message.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <opencv2/imgcodecs.hpp>
#include <sys/stat.h>

#include <doctest/doctest.h>

#include "integration/host_runner.h"
#include "support/class_folders.h"
#include "support/test_paths.h"

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

/// A csv file's lines split at commas (the paths and class names here hold none).
std::vector<std::vector<std::string>> csv_cells(const fs::path& file) {
  std::vector<std::vector<std::string>> rows;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    for (std::size_t at = 0, next = 0; next != std::string::npos; at = next + 1)
      cells.push_back(line.substr(at, (next = line.find(',', at)) == std::string::npos ? next : next - at));
    rows.push_back(cells);
  }
  return rows;
}

/// One trained run shared by the cases: 1 epoch of small_cnn on dark/light folders, val in val/.
struct TrainedRun {
  fs::path dir, cfg, out;
  TrainedRun() : dir(tp::test::fresh_dir("image_folder_predict_images")), cfg(dir / "run.toml"), out(dir / "out") {
    tp::test::write_dark_light_folders(dir / "train", 6);
    tp::test::write_dark_light_folders(dir / "val", 3);
    std::ofstream(cfg) << tp::test::dark_light_run_config("images", dir / "train", dir / "val", 4, 4);
    const auto train = tp::test::run_host("train --config '" + cfg.string() + "' --output-dir '" + out.string() + "'");
    INFO(train.output);
    REQUIRE(train.exit_code == 0);
  }
  tp::test::HostRun predict(const std::string& args) const {
    return tp::test::run_host("predict --config '" + cfg.string() + "' --output-dir '" + out.string() +
                              "' --checkpoint last " + args);
  }
};

const TrainedRun& trained_run() {
  static const TrainedRun run;
  return run;
}

/// Two rows' logits equal within float rounding (the same file at another batch size).
bool same_logits(const Json& a, const Json& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::abs(a[i].get<double>() - b[i].get<double>()) > 1e-5 * std::max(1.0, std::abs(b[i].get<double>())))
      return false;
  return true;
}

}  // namespace

TEST_CASE("host predict --images DIR: each file's path, class and probability; the same logits as --split val") {
  const TrainedRun& run = trained_run();
  const fs::path by_split = run.dir / "split.csv", by_images = run.dir / "images.csv";
  const auto split = run.predict("--split val --output '" + by_split.string() + "'");
  INFO(split.output);
  REQUIRE(split.exit_code == 0);
  const auto images =
      run.predict("--images '" + (run.dir / "val").string() + "' --output '" + by_images.string() + "'");
  INFO(images.output);
  REQUIRE(images.exit_code == 0);
  CHECK(images.output.find("columns: index, path, logits, logits.argmax, logits.class, logits.prob\n") !=
        std::string::npos);
  // A split's rows name each sample's file as the dataset read it (plugin ABI 1.13), then its label.
  CHECK(split.output.find("columns: index, path, logits, logits.argmax, logits.class, logits.prob, label\n") !=
        std::string::npos);

  const auto split_rows = csv_cells(by_split), image_rows = csv_cells(by_images);
  REQUIRE(split_rows.size() == 7);
  REQUIRE(image_rows.size() == 7);
  CHECK(image_rows[0] == std::vector<std::string>{"index", "path", "logits.0", "logits.1", "logits.argmax",
                                                  "logits.class", "logits.prob"}); // no label
  // The directory's files sorted by their path relative to it; the val split's listing is that order.
  const std::vector<std::string> order = {"dark/0.png", "dark/1.png", "dark/2.png", "light/0.png", "light/1.png",
                                          "light/2.png"};
  for (std::size_t i = 1; i < image_rows.size(); ++i) {
    const auto& row = image_rows[i];
    const auto& same = split_rows[i]; // index,path,logits.0,logits.1,logits.argmax,logits.class,logits.prob,label
    REQUIRE(row.size() == 7);
    REQUIRE(same.size() == 8);
    CHECK(row[0] == std::to_string(i - 1));
    CHECK(row[1] == order[i - 1]);
    CHECK(same[1] == (run.dir / "val" / order[i - 1]).string());
    // Bit for bit: the csv writes each float as the shortest text that reads back to it.
    CHECK(row[2] == same[2]);
    CHECK(row[3] == same[3]);
    CHECK(row[4] == same[4]);
    CHECK(row[5] == (row[4] == "0" ? "dark" : "light"));
    CHECK(row[6] == same[6]);
    CHECK(same[7] == (order[i - 1].starts_with("dark") ? "0" : "1")); // the label, after the outputs
  }
}

TEST_CASE("host predict --images DIR says what it left out: other endings, links that lead nowhere") {
  // Before, a directory of 6 entries predicted 1 file and said nothing of the other 5.
  const TrainedRun& run = trained_run();
  const fs::path dir = run.dir / "mixed";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(run.dir / "val" / "dark" / "0.png", dir / "a.png");
  fs::copy_file(run.dir / "val" / "dark" / "1.png", dir / "e.jfif"); // an image under an ending not read
  std::ofstream(dir / "d.gif") << "GIF89a";
  fs::create_symlink(dir / "nowhere.png", dir / "b_dangling.png");
  fs::create_symlink(dir / "c_self.png", dir / "c_self.png");
  const fs::path out = run.dir / "mixed.csv";
  const auto images = run.predict("--images '" + dir.string() + "' --output '" + out.string() + "'");
  INFO(images.output);
  REQUIRE(images.exit_code == 0);
  CHECK(images.output.find("host predict --images: left out of '" + dir.string() + "': 2 file(s) whose ending is not "
                           "one the evaluation table reads (.gif: 1, .jfif: 1); 2 link(s) that lead nowhere "
                           "(b_dangling.png, c_self.png)") != std::string::npos);
  CHECK(csv_cells(out).size() == 2); // the header and a.png
}

// Security trial F7: a file name in an images directory (an upload folder) reached the terminal
// raw: ESC[2J cleared it and a newline forged a log line.
TEST_CASE("host predict --images DIR: a left-out name holding ESC or a newline is shown escaped") {
  const TrainedRun& run = trained_run();
  const fs::path dir = run.dir / "odd_names";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(run.dir / "val" / "dark" / "0.png", dir / "a.png");
  fs::create_symlink("/nonexistent", dir / "dead\x1b[2J\x1b[31m\nFAKE.png");
  const auto images = run.predict("--images '" + dir.string() + "' --output '" + (run.dir / "odd.csv").string() + "'");
  INFO(images.output);
  REQUIRE(images.exit_code == 0);
  CHECK(images.output.find("1 link(s) that lead nowhere (dead\\u001B[2J\\u001B[31m\\u000AFAKE.png)") != std::string::npos);
  CHECK(images.output.find('\x1b') == std::string::npos);
  CHECK(images.output.find("\nFAKE") == std::string::npos);
}

// Security trial F15: a FIFO named .jpg and a link to /dev/zero named .png were counted as files
// "whose ending is not one the evaluation table reads (.jpg: 1, .png: 1)", endings it reads.
TEST_CASE("host predict --images DIR: a FIFO or a device is left out as what it is, not for its ending") {
  const TrainedRun& run = trained_run();
  const fs::path dir = run.dir / "not_files";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(run.dir / "val" / "dark" / "0.png", dir / "a.png");
  REQUIRE(mkfifo((dir / "fifo.jpg").c_str(), 0600) == 0);
  fs::create_symlink("/dev/zero", dir / "zero.png");
  const auto images = run.predict("--images '" + dir.string() + "' --output '" + (run.dir / "nf.csv").string() + "'");
  INFO(images.output);
  REQUIRE(images.exit_code == 0);
  CHECK(images.output.find("left out of '" + dir.string() + "': 2 entr(ies) that are no regular file, which an image "
                           "must be (fifo.jpg (a FIFO), zero.png (a character device))") != std::string::npos);
  CHECK(images.output.find("whose ending") == std::string::npos);
}

TEST_CASE("host predict --images LIST: the list's order, its paths as written, comments skipped; jsonl") {
  const TrainedRun& run = trained_run();
  const fs::path list = run.dir / "lists" / "new.txt";
  fs::create_directories(list.parent_path());
  const std::string absolute = (run.dir / "val" / "dark" / "2.png").string();
  std::ofstream(list) << "# new images\n../val/light/1.png\n\n  " << absolute << "  \r\n../val/dark/0.png\n";
  const fs::path output = run.dir / "list.jsonl";
  const auto images = run.predict("--images '" + list.string() + "' --format jsonl --output '" + output.string() + "'");
  INFO(images.output);
  REQUIRE(images.exit_code == 0);
  std::ifstream in(output);
  std::vector<Json> rows;
  for (std::string line; std::getline(in, line);) rows.push_back(Json::parse(line));
  REQUIRE(rows.size() == 3);
  const std::vector<std::string> paths = {"../val/light/1.png", absolute, "../val/dark/0.png"};
  std::map<std::string, Json> by_path;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    CHECK(rows[i].at("index") == i);
    CHECK(rows[i].at("path") == paths[i]);
    CHECK(rows[i].at("logits").size() == 2);
    CHECK(rows[i].at("logits.class") == (rows[i].at("logits.argmax") == 0 ? "dark" : "light"));
    CHECK(rows[i].at("logits.prob").get<double>() >= 0.5);
    CHECK_FALSE(rows[i].contains("label"));
  }
  // One image given alone (recognised by its first bytes, not taken for a list): one row, the
  // list's logits for the same file.
  const std::string one = (run.dir / "val" / "light" / "1.png").string();
  const fs::path single = run.dir / "one.jsonl";
  const auto alone = run.predict("--images '" + one + "' --format jsonl --output '" + single.string() + "'");
  INFO(alone.output);
  REQUIRE(alone.exit_code == 0);
  std::ifstream single_in(single);
  std::string line;
  REQUIRE(std::getline(single_in, line));
  const Json row = Json::parse(line);
  CHECK(row.at("path") == one);
  // Alone it runs at batch 1, the list at 3 (a batch is padded no further than its input, security
  // trial F11), and CPU kernels may round the last bits otherwise per batch size.
  CHECK(same_logits(row.at("logits"), rows[0].at("logits")));
  CHECK_FALSE(std::getline(single_in, line));
  // A TIFF and a PPM given alone are images too (data trial F18: read as lists of paths, the
  // error showing their bytes); lossless, so the same logits.
  const cv::Mat pixels = cv::imread(one);
  for (const std::string ending : {".tif", ".ppm"}) {
    CAPTURE(ending);
    const fs::path file = run.dir / ("one" + ending), out = run.dir / ("one" + ending + ".jsonl");
    REQUIRE(cv::imwrite(file.string(), pixels));
    const auto other = run.predict("--images '" + file.string() + "' --format jsonl --output '" + out.string() + "'");
    INFO(other.output);
    REQUIRE(other.exit_code == 0);
    std::ifstream other_in(out);
    REQUIRE(std::getline(other_in, line));
    CHECK(same_logits(Json::parse(line).at("logits"), rows[0].at("logits")));
  }
  // A list whose first line starts as a BMP file does ("BM") is still a list.
  fs::create_directories(run.dir / "lists" / "BMfiles");
  fs::copy_file(one, run.dir / "lists" / "BMfiles" / "1.png", fs::copy_options::overwrite_existing);
  std::ofstream(run.dir / "lists" / "bm.txt") << "BMfiles/1.png\n";
  const fs::path bm_output = run.dir / "bm.jsonl";
  const auto bm = run.predict("--images '" + (run.dir / "lists" / "bm.txt").string() + "' --format jsonl --output '" +
                              bm_output.string() + "'");
  INFO(bm.output);
  REQUIRE(bm.exit_code == 0);
  std::ifstream bm_in(bm_output);
  REQUIRE(std::getline(bm_in, line));
  CHECK(Json::parse(line).at("path") == "BMfiles/1.png");
}

TEST_CASE("host predict --images refuses what it cannot read, with exit 2 and what to do") {
  const TrainedRun& run = trained_run();
  const auto refused = [&](const std::string& args, const std::string& message) {
    const auto result = run.predict(args);
    INFO(result.output);
    CHECK(result.exit_code == 2);
    CHECK(result.output.find(message) != std::string::npos);
  };
  refused("--images '" + (run.dir / "missing").string() + "'", "does not exist; give a directory of images");
  fs::create_directories(run.dir / "empty" / "sub");
  std::ofstream(run.dir / "empty" / "sub" / "notes.txt") << "not an image\n";
  refused("--images '" + (run.dir / "empty").string() + "'",
          "holds no image file (ending in .jpg .jpeg .png .ppm .bmp .pgm .tif .tiff .webp, any case: the evaluation table's `extensions`");
  const fs::path list = run.dir / "bad.txt";
  // A byte-order mark and CRLF (Notepad, Excel; data trial F6): line 1 is read, line 2 is refused.
  std::ofstream(list) << "\xEF\xBB\xBFval/dark/0.png\r\nval/dark/9.png\r\n";
  refused("--images '" + list.string() + "'", "line 2 of '" + list.string() +
                                                  "' names 'val/dark/9.png', which does not exist (relative paths "
                                                  "start from the list's directory)");
  std::ofstream(run.dir / "comments.txt") << "# nothing\n\n";
  refused("--images '" + (run.dir / "comments.txt").string() + "'", "names no file");
  refused("--images '" + (run.dir / "val").string() + "' --split val", "give one of them");

  // A dataset that reads no plain files: the evaluation table names it and says what to do.
  const fs::path shapes = run.dir / "shapes.toml";
  std::ofstream(shapes) << "[run]\nname = \"shapes\"\ndevice = \"cpu\"\n"
                           "[data.train]\ncomponent = \"org.torchhost.shapes\"\n"
                           "[model]\ncomponent = \"org.torchhost.small_cnn\"\nnum_classes = 3\n"
                           "[loss]\ncomponent = \"org.torchhost.cross_entropy\"\n";
  const auto other = tp::test::run_host("predict --config '" + shapes.string() + "' --output-dir '" +
                                        (run.dir / "shapes_out").string() + "' --images '" +
                                        (run.dir / "val").string() + "'");
  INFO(other.output);
  CHECK(other.exit_code == 2);
  CHECK(other.output.find("dataset 'org.torchhost.shapes' cannot read plain image files") != std::string::npos);
}

TEST_CASE("host predict --images: a listed file that is not an image follows data.on_bad_sample") {
  const TrainedRun& run = trained_run();
  const fs::path list = run.dir / "with_text.txt";
  std::ofstream(run.dir / "notes.png") << "not a PNG\n";
  std::ofstream(list) << "val/dark/0.png\nnotes.png\nval/light/0.png\n";
  const auto failed = run.predict("--images '" + list.string() + "' --output '" + (run.dir / "f.csv").string() + "'");
  INFO(failed.output);
  CHECK(failed.exit_code == 1); // as a bad sample of a split
  CHECK(failed.output.find((run.dir / "notes.png").string()) != std::string::npos);
  CHECK_FALSE(fs::exists(run.dir / "f.csv"));

  const fs::path output = run.dir / "skipped.csv";
  const auto skipped = run.predict("--images '" + list.string() + "' --set data.on_bad_sample='\"skip\"' --output '" +
                                   output.string() + "'");
  INFO(skipped.output);
  REQUIRE(skipped.exit_code == 0);
  CHECK(skipped.output.find("1 sample was skipped (data.on_bad_sample = \"skip\"): their rows are missing (the log "
                            "names it)") != std::string::npos);
  CHECK(skipped.output.find((run.dir / "notes.png").string()) != std::string::npos); // the log names the file
  const auto rows = csv_cells(output);
  REQUIRE(rows.size() == 3);
  CHECK(rows[1][0] == "0");
  CHECK(rows[1][1] == "val/dark/0.png");
  CHECK(rows[2][0] == "2");
  CHECK(rows[2][1] == "val/light/0.png");
}

TEST_CASE("host predict --images: a path with a comma, a quote or a control character stays one field") {
  const TrainedRun& run = trained_run();
  const fs::path odd = run.dir / "odd";
  fs::create_directories(odd);
  fs::copy_file(run.dir / "val" / "dark" / "0.png", odd / "x,\"y\".png");
  fs::copy_file(run.dir / "val" / "light" / "0.png", odd / "tab\there.PNG"); // endings in any case
  const fs::path csv = run.dir / "odd.csv", jsonl = run.dir / "odd.jsonl";
  const auto as_csv = run.predict("--images '" + odd.string() + "' --output '" + csv.string() + "'");
  INFO(as_csv.output);
  REQUIRE(as_csv.exit_code == 0);
  std::ifstream in(csv);
  std::string header, tab, quoted;
  REQUIRE(std::getline(in, header));
  REQUIRE(std::getline(in, tab));
  REQUIRE(std::getline(in, quoted));
  CHECK(tab.starts_with("0,tab\there.PNG,")); // sorted: 't' (0x74) before 'x'
  CHECK(quoted.starts_with("1,\"x,\"\"y\"\".png\",")); // RFC 4180
  const auto as_jsonl = run.predict("--images '" + odd.string() + "' --format jsonl --output '" + jsonl.string() + "'");
  INFO(as_jsonl.output);
  REQUIRE(as_jsonl.exit_code == 0);
  std::ifstream lines(jsonl);
  std::string line;
  REQUIRE(std::getline(lines, line));
  CHECK(line.find("\"path\":\"tab\\u0009here.PNG\"") != std::string::npos);
  CHECK(Json::parse(line).at("path") == "tab\there.PNG");
  REQUIRE(std::getline(lines, line));
  CHECK(Json::parse(line).at("path") == "x,\"y\".png");

  // A name that is not UTF-8 (Latin-1, from an old archive): each such byte as \udcXX, Python's
  // surrogateescape, so the line stays JSON (before, the raw byte broke json.loads); UTF-8 as is.
  const fs::path latin = run.dir / "latin";
  fs::create_directories(latin);
  fs::copy_file(run.dir / "val" / "dark" / "0.png", latin / "caf\xc3\xa9.png");
  fs::copy_file(run.dir / "val" / "light" / "0.png", latin / "r\xe9sum\xe9.png");
  const fs::path latin_jsonl = run.dir / "latin.jsonl";
  const auto as_latin = run.predict("--images '" + latin.string() + "' --format jsonl --output '" + latin_jsonl.string() + "'");
  INFO(as_latin.output);
  REQUIRE(as_latin.exit_code == 0);
  std::ifstream latin_lines(latin_jsonl);
  REQUIRE(std::getline(latin_lines, line));
  CHECK(Json::parse(line).at("path") == "caf\xc3\xa9.png");
  REQUIRE(std::getline(latin_lines, line));
  CHECK(line.find("\"path\":\"r\\udce9sum\\udce9.png\"") != std::string::npos);
  const auto python = tp::test::run_shell("'" + std::string(tp::test::python()) + "' -c \"import json, os, sys; "
                                          "rows = [json.loads(l) for l in open(sys.argv[1], encoding='utf-8')]; "
                                          "print(os.fsencode(rows[1]['path']) == b'r\\\\xe9sum\\\\xe9.png')\" '" +
                                          latin_jsonl.string() + "'");
  INFO(python.output);
  CHECK(python.output.find("True") != std::string::npos);
}

// Data trial F5: with 144 of 160 files bad, predict's summary said "(the log names them)" where the
// log named 5; it now says how many it names.
TEST_CASE("host predict --images: more skipped samples than the log names: the summary says how many it names") {
  const TrainedRun& run = trained_run();
  const fs::path list = run.dir / "many_bad.txt";
  std::ofstream out(list);
  out << "val/dark/0.png\n";
  for (int i = 0; i < 7; ++i) {
    std::ofstream(run.dir / ("bad" + std::to_string(i) + ".png")) << "not a PNG\n";
    out << "bad" << i << ".png\n";
  }
  out.close();
  const auto skipped = run.predict("--images '" + list.string() + "' --set data.on_bad_sample='\"skip\"' --output '" +
                                   (run.dir / "many_bad.csv").string() + "'");
  INFO(skipped.output);
  REQUIRE(skipped.exit_code == 0);
  CHECK(skipped.output.find("7 samples were skipped (data.on_bad_sample = \"skip\"): their rows are missing (the log "
                            "names the first 5 of them)") != std::string::npos);
}
