#include <gtest/gtest.h>
#include <loom/core/error.h>
#include <loom/core/file.h>
#include <loom/train/history.h>
#include <loom/train/plot.h>
#include <loom/train/progress.h>

#include <algorithm>
#include <cmath>
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
  for (size_t p = svg.find("<path class=\"curve\""); p != std::string::npos; p = svg.find("<path class=\"curve\"", p + 1)) ++lines;
  EXPECT_EQ(lines, 3u);  // loss, val_loss, accuracy
  EXPECT_NE(svg.find("data-series=\"val_loss\""), std::string::npos);
  EXPECT_NE(svg.find(">validation<"), std::string::npos);  // the legend
  size_t markers = 0;
  for (size_t p = svg.find("fill-opacity=\"1\"><title>"); p != std::string::npos; p = svg.find("fill-opacity=\"1\"><title>", p + 1)) ++markers;
  EXPECT_EQ(markers, 15u);  // a visible point per epoch of each series
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);  // validation dashed
  EXPECT_THROW(h["val_accuracy"], loom::ValueError);

  const auto path = std::filesystem::temp_directory_path() / "loom_plot_test.svg";
  save_learning_curves(h, path.string());
  EXPECT_EQ(loom::read_file(path.string()), learning_curves_svg(h));
  std::filesystem::remove(path);
}

TEST(Plot, LinePlotDrawsSeriesBandsAndDownsamplesKeepingSpikes) {
  PlotSeries a{.id = "a<b", .label = "run \"a\"", .x = {}, .y = {}};
  for (int i = 0; i < 10000; ++i) {
    a.x.push_back(i);
    a.y.push_back(i == 4321 ? 100.0 : std::sin(i / 100.0));
  }
  PlotSeries b{.id = "b", .label = "group", .x = {0, 1, 2}, .y = {1, 2, 3}, .lo = {0, 1, 2}, .hi = {2, 3, 4}, .dashed = true};
  const std::string svg = line_plot_svg({a, b}, {.title = "T", .y_label = "loss", .width = 600, .height = 300});
  EXPECT_NE(svg.find("data-series=\"a&lt;b\""), std::string::npos);  // ids and labels escaped
  EXPECT_NE(svg.find("run &quot;a&quot;"), std::string::npos);
  size_t bands = 0, points = 0;
  for (size_t p = svg.find("class=\"band\""); p != std::string::npos; p = svg.find("class=\"band\"", p + 1)) ++bands;
  for (size_t p = svg.find("class=\"point\""); p != std::string::npos; p = svg.find("class=\"point\"", p + 1)) ++points;
  EXPECT_EQ(bands, 1u);
  EXPECT_LT(points, 3u * 510 + 3);  // at most three per pixel column of a 510-pixel plot, plus b's 3
  EXPECT_NE(svg.find(": 100</title>"), std::string::npos);  // the spike survives
  const std::vector<size_t> keep = downsample(a.x, a.y, 0, 9999, 100);
  EXPECT_LE(keep.size(), 300u);
  EXPECT_NE(std::find(keep.begin(), keep.end(), 4321u), keep.end());
  EXPECT_TRUE(std::is_sorted(keep.begin(), keep.end()));
  EXPECT_THROW(line_plot_svg({PlotSeries{.id = "c", .x = {0, 1}, .y = {1}}}), loom::ValueError);
  EXPECT_THROW(line_plot_svg({b}, {.width = 100}), loom::ValueError);
  // smoothing: TensorBoard's debiased EMA; NaN stays a gap
  const std::vector<double> sm = smooth({1, std::nan(""), 3}, 0.5);
  EXPECT_DOUBLE_EQ(sm[0], 1);
  EXPECT_TRUE(std::isnan(sm[1]));
  EXPECT_DOUBLE_EQ(sm[2], (0.5 * 0.5 * 1 + 0.5 * 3) / (1 - 0.25));
}

TEST(Plot, AnOverlayOfManySeriesNamesEachCurveInsteadOfALegend) {
  std::vector<PlotSeries> many;
  for (int k = 0; k < 60; ++k) {
    PlotSeries s;
    s.id = std::to_string(k);
    s.label = "run " + std::to_string(k);
    for (int e = 0; e < 50; ++e) s.x.push_back(e), s.y.push_back(1.0 / (e + 1 + k));
    many.push_back(std::move(s));
  }
  auto count = [](const std::string& svg, const std::string& what) {
    size_t n = 0;
    for (size_t p = svg.find(what); p != std::string::npos; p = svg.find(what, p + 1)) ++n;
    return n;
  };
  const std::string svg = line_plot_svg(many, {.y_label = "loss"});
  EXPECT_EQ(count(svg, "<path class=\"curve\""), 60u);
  EXPECT_EQ(count(svg, "<title>run "), 60u);  // on the curves
  EXPECT_EQ(count(svg, "class=\"point\""), 0u);
  EXPECT_EQ(count(svg, "class=\"legend\""), 0u);
  EXPECT_NE(svg.find("60 series: hover a curve for its name"), std::string::npos);
  many.resize(kMaxLegendSeries);  // up to the limit: a legend line per series, hover points
  const std::string few = line_plot_svg(many, {.y_label = "loss"});
  EXPECT_EQ(count(few, "class=\"legend\""), kMaxLegendSeries);
  EXPECT_EQ(count(few, "class=\"point\""), kMaxLegendSeries * 50);
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
