#pragma once
// Learning curves as SVG for the dashboard: several series overlaid on one pair of axes, each a
// <path class="curve" data-series="ID">, an optional band (a group's min..max) behind it, a
// hover point with its value per kept point, and a legend with each series' full name.
#include <cstddef>
#include <string>
#include <vector>

namespace loom::ui::detail {

struct Series {
  std::string id;      // data-series (a run id, a group's value)
  std::string label;   // the legend's text
  std::vector<double> x, y;       // NaN y: a gap
  std::vector<double> lo, hi;     // a band around y (empty: none)
};

// The indices of the points to draw so that about one or two remain per pixel column: in each
// of `columns` equal slices of [x0, x1], the first, the lowest and the highest point (in x
// order), so that spikes survive. x ascending.
std::vector<size_t> downsample(const std::vector<double>& x, const std::vector<double>& y, double x0, double x1, int columns);

// Exponential moving average with TensorBoard's debiasing (weight 0: the values as they are);
// NaN values are kept as gaps and do not enter the average.
std::vector<double> smooth(const std::vector<double>& y, double weight);

// The SVG of `series` (downsampled to the plot's width), `width` x about `height` pixels plus
// one legend line per series.
std::string overlay_svg(const std::vector<Series>& series, const std::string& x_label, const std::string& y_label, int width,
                        int height);

}  // namespace loom::ui::detail
