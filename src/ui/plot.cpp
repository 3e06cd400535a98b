// Hand-written SVG (src/ui/plot.h): nice axis ticks, a light grid, one path per series.
#include "ui/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>

#include "ui/api.h"

namespace loom::ui::detail {

namespace {

const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

std::string value_text(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

// 1, 2, 2.5 or 5 times a power of ten, giving about `target` intervals.
double nice_step(double span, int target) {
  const double raw = span / target;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (raw <= m * p) return m * p;
  return 10 * p;
}

}  // namespace

std::vector<size_t> downsample(const std::vector<double>& x, const std::vector<double>& y, double x0, double x1, int columns) {
  std::vector<size_t> keep;
  const size_t n = std::min(x.size(), y.size());
  if (n <= static_cast<size_t>(columns) * 2 || !(x1 > x0)) {
    for (size_t i = 0; i < n; ++i) keep.push_back(i);
    return keep;
  }
  size_t i = 0;
  while (i < n) {
    const int column = std::clamp(static_cast<int>((x[i] - x0) / (x1 - x0) * columns), 0, columns - 1);
    size_t first = i, lo = i, hi = i;
    size_t j = i;
    for (; j < n && std::clamp(static_cast<int>((x[j] - x0) / (x1 - x0) * columns), 0, columns - 1) == column; ++j) {
      if (std::isnan(y[j])) continue;
      if (std::isnan(y[lo]) || y[j] < y[lo]) lo = j;
      if (std::isnan(y[hi]) || y[j] > y[hi]) hi = j;
    }
    for (size_t k : {first, std::min(lo, hi), std::max(lo, hi)})
      if (keep.empty() || keep.back() < k) keep.push_back(k);
    i = j;
  }
  return keep;
}

std::vector<double> smooth(const std::vector<double>& y, double weight) {
  std::vector<double> out(y.size());
  double last = 0;
  int64_t n = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    if (std::isnan(y[i])) {
      out[i] = y[i];
      continue;
    }
    last = last * weight + (1 - weight) * y[i];
    ++n;
    const double debias = 1 - std::pow(weight, static_cast<double>(n));
    out[i] = debias > 0 ? last / debias : y[i];
  }
  return out;
}

std::string overlay_svg(const std::vector<Series>& series, const std::string& x_label, const std::string& y_label, int width,
                        int height) {
  constexpr double kLeft = 70, kRight = 20, kTop = 16, kBottom = 44, kLegendLine = 18;
  const double pw = width - kLeft - kRight, ph = height - kTop - kBottom;
  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin, ymin = xmin, ymax = -xmin;
  for (const Series& s : series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.y[i]) || !std::isfinite(s.x[i])) continue;
      xmin = std::min(xmin, s.x[i]);
      xmax = std::max(xmax, s.x[i]);
      const double lo = s.lo.empty() ? s.y[i] : s.lo[i], hi = s.hi.empty() ? s.y[i] : s.hi[i];
      ymin = std::min({ymin, s.y[i], lo});
      ymax = std::max({ymax, s.y[i], hi});
    }
  const bool empty = !std::isfinite(xmin);
  if (empty) xmin = 0, xmax = 1, ymin = 0, ymax = 1;
  if (xmax == xmin) xmin -= 0.5, xmax += 0.5;
  if (ymax == ymin) ymin -= std::max(0.5, std::abs(ymin) * 0.1), ymax += std::max(0.5, std::abs(ymax) * 0.1);
  const double pad = (ymax - ymin) * 0.05;
  ymin -= pad, ymax += pad;
  auto X = [&](double v) { return kLeft + (v - xmin) / (xmax - xmin) * pw; };
  auto Y = [&](double v) { return kTop + (ymax - v) / (ymax - ymin) * ph; };

  const double total_h = height + kLegendLine * static_cast<double>(series.size()) + 8;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" width=\"" + std::to_string(width) + "\" height=\"" +
                    num(total_h) + "\" viewBox=\"0 0 " + std::to_string(width) + " " + num(total_h) + "\" font-family=\"sans-serif\">";
  svg += "<rect x=\"0\" y=\"0\" width=\"" + std::to_string(width) + "\" height=\"" + num(total_h) + "\" fill=\"#fff\"/>";
  const double ys = nice_step(ymax - ymin, 5);
  for (double v = std::ceil(ymin / ys) * ys; v <= ymax + 1e-12; v += ys) {
    svg += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(Y(v)) + "\" x2=\"" + num(kLeft + pw) + "\" y2=\"" + num(Y(v)) +
           "\" stroke=\"#e5e5e5\"/><text x=\"" + num(kLeft - 6) + "\" y=\"" + num(Y(v) + 4) +
           "\" text-anchor=\"end\" font-size=\"11\" fill=\"#555\">" + value_text(std::abs(v) < ys * 1e-9 ? 0 : v) + "</text>";
  }
  const double xs = nice_step(xmax - xmin, std::max(2, static_cast<int>(pw / 90)));
  for (double v = std::ceil(xmin / xs) * xs; v <= xmax + 1e-12; v += xs)
    svg += "<line x1=\"" + num(X(v)) + "\" y1=\"" + num(kTop) + "\" x2=\"" + num(X(v)) + "\" y2=\"" + num(kTop + ph) +
           "\" stroke=\"#f0f0f0\"/><text x=\"" + num(X(v)) + "\" y=\"" + num(kTop + ph + 16) +
           "\" text-anchor=\"middle\" font-size=\"11\" fill=\"#555\">" + value_text(std::abs(v) < xs * 1e-9 ? 0 : v) + "</text>";
  svg += "<rect x=\"" + num(kLeft) + "\" y=\"" + num(kTop) + "\" width=\"" + num(pw) + "\" height=\"" + num(ph) +
         "\" fill=\"none\" stroke=\"#999\"/>";
  svg += "<text x=\"" + num(kLeft + pw / 2) + "\" y=\"" + num(kTop + ph + 34) + "\" text-anchor=\"middle\" font-size=\"12\">" +
         xml_escape(x_label) + "</text>";
  svg += "<text x=\"14\" y=\"" + num(kTop + ph / 2) + "\" text-anchor=\"middle\" font-size=\"12\" transform=\"rotate(-90 14 " +
         num(kTop + ph / 2) + ")\">" + xml_escape(y_label) + "</text>";
  if (empty)
    svg += "<text x=\"" + num(kLeft + pw / 2) + "\" y=\"" + num(kTop + ph / 2) +
           "\" text-anchor=\"middle\" font-size=\"13\" fill=\"#888\">no values to draw</text>";

  for (size_t k = 0; k < series.size(); ++k) {
    const Series& s = series[k];
    const std::string colour = kColours[k % std::size(kColours)];
    const std::string id = xml_escape(s.id);
    const std::vector<size_t> keep = downsample(s.x, s.y, xmin, xmax, static_cast<int>(pw));
    svg += "<g class=\"series\" data-series=\"" + id + "\">";
    if (!s.lo.empty() && !keep.empty()) {
      std::string band;
      for (size_t i : keep) band += (band.empty() ? "M" : "L") + num(X(s.x[i])) + "," + num(Y(s.hi[i]));
      for (auto it = keep.rbegin(); it != keep.rend(); ++it) band += "L" + num(X(s.x[*it])) + "," + num(Y(s.lo[*it]));
      svg += "<path class=\"band\" d=\"" + band + "Z\" fill=\"" + colour + "\" fill-opacity=\"0.18\" stroke=\"none\"/>";
    }
    std::string d;
    bool pen_down = false;
    for (size_t i : keep) {
      if (!std::isfinite(s.y[i]) || !std::isfinite(s.x[i])) {
        pen_down = false;
        continue;
      }
      d += (pen_down ? "L" : "M") + num(X(s.x[i])) + "," + num(Y(s.y[i]));
      pen_down = true;
    }
    svg += "<path class=\"curve\" data-series=\"" + id + "\" d=\"" + (d.empty() ? "M0,0" : d) + "\" fill=\"none\" stroke=\"" + colour +
           "\" stroke-width=\"1.8\"/>";
    for (size_t i : keep) {
      if (!std::isfinite(s.y[i]) || !std::isfinite(s.x[i])) continue;
      svg += "<circle class=\"point\" cx=\"" + num(X(s.x[i])) + "\" cy=\"" + num(Y(s.y[i])) + "\" r=\"3\" fill=\"" + colour +
             "\" fill-opacity=\"0\"><title>" + xml_escape(s.label) + "\n" + xml_escape(x_label) + " " + value_text(s.x[i]) + ": " +
             value_text(s.y[i]) + "</title></circle>";
    }
    svg += "</g>";
    const double ly = height + kLegendLine * static_cast<double>(k) + 4;
    svg += "<g class=\"legend\" data-series=\"" + id + "\"><rect x=\"" + num(kLeft) + "\" y=\"" + num(ly) + "\" width=\"14\" height=\"10\" fill=\"" +
           colour + "\"/><text x=\"" + num(kLeft + 20) + "\" y=\"" + num(ly + 9) + "\" font-size=\"12\">" + xml_escape(s.label) +
           "</text></g>";
  }
  svg += "</svg>";
  return svg;
}

}  // namespace loom::ui::detail
