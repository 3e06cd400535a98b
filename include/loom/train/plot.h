#pragma once
// Line charts as SVG, drawn by hand (docs/training.md, "Learning curves"): one writer for the
// learning curves of a fit and for the dashboard's overlaid runs (docs/ui.md). Each series is a
// <g class="series" data-series="ID"> holding <path class="curve" data-series="ID">, an optional
// band (class "band") and a point per kept value with a <title> of its value for hovering; the
// legend gives each series' full name in <g class="legend" data-series="ID">, so a page's script
// can toggle series by their id.
#include <cstddef>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/train/history.h"

namespace loom::train {

struct LOOM_API PlotSeries {
  std::string id{};                // data-series (a run id, a group's value, "loss")
  std::string label{};             // the legend's text
  std::vector<double> x{}, y{};    // x ascending; a NaN y is a gap
  std::vector<double> lo{}, hi{};  // a band around y, as long as y (empty: none)
  bool dashed = false;             // validation series are
  std::string colour{};            // "#rrggbb"; empty: the palette's colour for the series' place
};

struct LOOM_API PlotOptions {
  std::string title{};             // above the axes; empty: none
  std::string x_label = "epoch";
  std::string y_label{};
  int width = 800, height = 360;   // the axes' area and labels; the legend adds a line per series
  bool markers = false;            // visible point markers (otherwise points show only on hover)
};

// The SVG of `series` on one pair of axes, each downsampled to about one or two points per pixel
// column (spikes kept). Past kMaxLegendSeries series (an overlay of hundreds of runs) the legend
// is one line saying how many, each curve carries its label as a <title> instead, and no hover
// points are drawn (tens of thousands of elements would slow the page more than they help). ValueError for a width below 200 or a height below 150 pixels, or a
// series whose x and y (or band) lengths differ.
inline constexpr size_t kMaxLegendSeries = 40;
LOOM_API std::string line_plot_svg(const std::vector<PlotSeries>& series, const PlotOptions& options = {});

// The indices of the points to draw so that about one or two remain per pixel column: in each
// of `columns` equal slices of [x0, x1], the first, the lowest and the highest point (in x
// order), so that spikes survive. x ascending.
LOOM_API std::vector<size_t> downsample(const std::vector<double>& x, const std::vector<double>& y, double x0, double x1, int columns);

// Exponential moving average with TensorBoard's debiasing (weight 0: the values as they are);
// NaN values are kept as gaps and do not enter the average.
LOOM_API std::vector<double> smooth(const std::vector<double>& y, double weight);

// Learning curves: one panel per quantity (loss first, then each metric; "lr" left out), the
// training series solid and the validation series ("val_" prefix) dashed, epochs from 1.
LOOM_API std::string learning_curves_svg(const History& history, const std::string& title = "Learning curves");
// Writes the SVG atomically; throws IOError naming the path.
LOOM_API void save_learning_curves(const History& history, const std::string& path, const std::string& title = "Learning curves");

}  // namespace loom::train
