#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/core/file.h>
#include <loom/train/plot.h>

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
