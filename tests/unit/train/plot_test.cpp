#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/core/file.h>
#include <loom/train/history.h>
#include <loom/train/plot.h>
#include <loom/train/progress.h>

#include <algorithm>
#include <filesystem>

using namespace loom::train;

TEST(Plot, LearningCurvesSvgHasAPanelPerQuantity) {
  History h;
  for (int e = 0; e < 5; ++e) {
    h.append("loss", 1.0 / (e + 1));
    h.append("val_loss", 1.2 / (e + 1));
    h.append("accuracy", 0.5 + 0.1 * e);
    h.append("lr", 0.1);
  }
  const std::string svg = learning_curves_svg(h, "My <run>");
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("My &lt;run&gt;"), std::string::npos);  // escaped title
  EXPECT_NE(svg.find(">Loss<"), std::string::npos);
  EXPECT_NE(svg.find(">Accuracy<"), std::string::npos);
  EXPECT_EQ(svg.find(">Lr<"), std::string::npos);  // the learning rate is not a panel
  size_t lines = 0;
  for (size_t p = svg.find("<polyline"); p != std::string::npos; p = svg.find("<polyline", p + 1)) ++lines;
  EXPECT_EQ(lines, 3u);  // loss, val_loss, accuracy
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);  // validation dashed
  EXPECT_THROW(h["val_accuracy"], loom::ValueError);

  const auto path = std::filesystem::temp_directory_path() / "loom_plot_test.svg";
  save_learning_curves(h, path.string());
  EXPECT_EQ(loom::read_file(path.string()), learning_curves_svg(h));
  std::filesystem::remove(path);
}


TEST(Progress, PlainLinesWhenNotATerminal) {
  std::FILE* f = std::tmpfile();
  ProgressBar bar(f, 2);
  EXPECT_FALSE(bar.interactive());
  bar.start_epoch(1, 3, 5);
  for (int s = 1; s <= 5; ++s) bar.update(s, 10, {{"loss", 1.0 / s}});
  bar.end_epoch({{"loss", 0.2}, {"val_loss", 0.3}});
  std::rewind(f);
  std::string text;
  char buf[512];
  while (std::fgets(buf, sizeof buf, f)) text += buf;
  std::fclose(f);
  // steps 2 and 4 print progress, then the epoch's final line; no carriage returns
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3);
  EXPECT_EQ(text.find('\r'), std::string::npos);
  EXPECT_NE(text.find("Epoch 1/3"), std::string::npos);
  EXPECT_NE(text.find("2/5"), std::string::npos);
  EXPECT_NE(text.find("loss 0.5000"), std::string::npos);
  EXPECT_NE(text.find("ETA"), std::string::npos);
  EXPECT_NE(text.find("val_loss 0.3000"), std::string::npos);
  EXPECT_NE(text.find("samples/s"), std::string::npos);
}
