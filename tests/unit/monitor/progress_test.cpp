// tp::Progress's lines as the console shows them, without a training run: the loss a line shows
// is the epoch's own, never one carried over from the epoch before.
#include "tp/framework/monitor/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <doctest/doctest.h>

namespace {

constexpr double kNoLoss = NAN;  // a step that did not read the loss (not a logging step)

/// What `write` prints on stdout (file descriptor 1, which Progress writes through stdio).
std::string stdout_of(const std::function<void()>& write) {
  std::fflush(stdout);
  const int saved = ::dup(STDOUT_FILENO);
  std::FILE* capture = std::tmpfile();
  REQUIRE(capture != nullptr);
  ::dup2(::fileno(capture), STDOUT_FILENO);
  write();
  std::fflush(stdout);
  ::dup2(saved, STDOUT_FILENO);
  ::close(saved);
  std::string text;
  std::rewind(capture);
  for (int c; (c = std::fgetc(capture)) != EOF;) text += static_cast<char>(c);
  std::fclose(capture);
  return text;
}

}  // namespace

TEST_CASE("the progress line's loss is the epoch's latest logged one, and none before the epoch logs one") {
  // "lines" mode with no throttle: one line per update (the epoch's last comes from end_epoch).
  tp::Progress progress("lines", 1e-9, true);
  const std::string text = stdout_of([&] {
    progress.start_epoch(1, 3, 4);
    progress.update(1, kNoLoss, 0.1);
    progress.update(2, 1.1839, 0.1);  // a logging step
    progress.update(3, kNoLoss, 0.1);
    progress.update(4, kNoLoss, 0.1);
    progress.end_epoch({{"train/loss", 1.25}});
    progress.start_epoch(2, 3, 4);
    progress.update(1, kNoLoss, 0.1);
    progress.update(2, 0.9, 0.1);
    progress.update(3, kNoLoss, 0.1);
  });
  INFO(text);
  std::vector<std::string> lines;
  for (size_t start = 0, end; (end = text.find('\n', start)) != std::string::npos; start = end + 1)
    lines.push_back(text.substr(start, end - start));
  REQUIRE(lines.size() == 7);
  CHECK(lines[0].starts_with("epoch 2/3 1/4 lr"));  // no loss read yet
  CHECK(lines[1].starts_with("epoch 2/3 2/4 loss 1.1839 lr"));
  CHECK(lines[2].starts_with("epoch 2/3 3/4 loss 1.1839 lr"));  // this epoch's latest
  CHECK(lines[3].starts_with("epoch 2/3 4/4 loss 1.1839 lr"));
  CHECK(lines[3].ends_with(" train/loss 1.2500"));
  // Epoch 3 has logged nothing at its first step: epoch 2's 1.1839 is not its loss (before: shown).
  CHECK(lines[4].starts_with("epoch 3/3 1/4 lr"));
  CHECK(lines[5].starts_with("epoch 3/3 2/4 loss 0.9000 lr"));
  CHECK(lines[6].starts_with("epoch 3/3 3/4 loss 0.9000 lr"));
}
