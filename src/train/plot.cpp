// Hand-written SVG (include/loom/train/plot.h): nice axis ticks, a light grid, one path per
// series, and the learning curves of a fit as panels of such charts.
#include "loom/train/plot.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <limits>

#include "loom/core/error.h"
#include "loom/core/file.h"

namespace loom::train {

namespace {

const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

// std::to_chars prints as printf's "%.1f" and "%.6g" do, without the locale and several times
// faster: the curves of 1,000 runs write about 100,000 coordinates (docs/ui.md).
std::string num(double v) {
  char b[400];  // "%.1f" of the largest double: 309 digits
  return std::string(b, std::to_chars(b, b + sizeof b, v, std::chars_format::fixed, 1).ptr);
}

std::string value_text(double v) {
  char b[32];
  return std::string(b, std::to_chars(b, b + sizeof b, v, std::chars_format::general, 6).ptr);
}

// Text and attribute values.
std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '"') o += "&quot;";
    else if (c == '\'') o += "&#39;";
    else o += c;
  }
  return o;
}

// 1, 2, 2.5 or 5 times a power of ten, giving about `target` intervals.
double nice_step(double span, int target) {
  const double raw = span / target;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (raw <= m * p) return m * p;
  return 10 * p;
}

int column_of(double x, double x0, double x1, int columns) {
  return std::clamp(static_cast<int>((x - x0) / (x1 - x0) * columns), 0, columns - 1);
}

// "val_accuracy" -> "Accuracy" for a panel's title.
std::string pretty(const std::string& name) {
  std::string s = name;
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  std::replace(s.begin(), s.end(), '_', ' ');
  return s;
}

}  // namespace

std::vector<size_t> downsample(const std::vector<double>& x, const std::vector<double>& y, double x0, double x1, int columns) {
  std::vector<size_t> keep;
  const size_t n = std::min(x.size(), y.size());
  if (columns < 1 || n <= static_cast<size_t>(columns) * 2 || !(x1 > x0)) {
    for (size_t i = 0; i < n; ++i) keep.push_back(i);
    return keep;
  }
  size_t i = 0;
  while (i < n) {
    const int column = column_of(x[i], x0, x1, columns);
    size_t first = i, lo = i, hi = i;
    size_t j = i;
    for (; j < n && column_of(x[j], x0, x1, columns) == column; ++j) {
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

namespace {

void check_plot_arguments(const std::vector<PlotSeries>& series, const PlotOptions& o) {
  if (o.width < 200 || o.height < 150)
    throw ValueError("line_plot_svg: size " + std::to_string(o.width) + " x " + std::to_string(o.height) +
                     " pixels (valid: a width of at least 200 and a height of at least 150)");
  for (const PlotSeries& s : series)
    if (s.x.size() != s.y.size() || (!s.lo.empty() && s.lo.size() != s.y.size()) || s.lo.size() != s.hi.size())
      throw ValueError("line_plot_svg: series '" + s.id + "' has " + std::to_string(s.x.size()) + " x, " + std::to_string(s.y.size()) +
                       " y, " + std::to_string(s.lo.size()) + " lo and " + std::to_string(s.hi.size()) +
                       " hi values (valid: as many x as y, and a band of none or as many)");
}

// The plotting area in pixels and the value ranges it shows: the finite points and bands of
// every series, widened when flat and padded by 5% vertically.
struct Frame {
  static constexpr double kLeft = 70, kRight = 20, kBottom = 44, kLegendLine = 18;
  double top = 0, pw = 0, ph = 0;
  double xmin = 0, xmax = 1, ymin = 0, ymax = 1;
  bool empty = true;  // no finite point: the unit square, and a note
  double X(double v) const { return kLeft + (v - xmin) / (xmax - xmin) * pw; }
  double Y(double v) const { return top + (ymax - v) / (ymax - ymin) * ph; }
};

Frame plot_frame(const std::vector<PlotSeries>& series, const PlotOptions& o) {
  Frame f;
  const double title_h = o.title.empty() ? 0 : 28;
  f.top = 16 + title_h;
  f.pw = o.width - Frame::kLeft - Frame::kRight, f.ph = o.height - f.top - Frame::kBottom;
  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin, ymin = xmin, ymax = -xmin;
  for (const PlotSeries& s : series)
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i]) || !std::isfinite(s.x[i])) continue;
      xmin = std::min(xmin, s.x[i]);
      xmax = std::max(xmax, s.x[i]);
      const double lo = s.lo.empty() ? s.y[i] : s.lo[i], hi = s.hi.empty() ? s.y[i] : s.hi[i];
      ymin = std::min({ymin, s.y[i], lo});
      ymax = std::max({ymax, s.y[i], hi});
    }
  f.empty = !std::isfinite(xmin);
  if (f.empty) xmin = 0, xmax = 1, ymin = 0, ymax = 1;
  if (xmax == xmin) xmin -= 0.5, xmax += 0.5;
  if (ymax == ymin) ymin -= std::max(0.5, std::abs(ymin) * 0.1), ymax += std::max(0.5, std::abs(ymax) * 0.1);
  const double pad = (ymax - ymin) * 0.05;
  f.xmin = xmin, f.xmax = xmax, f.ymin = ymin - pad, f.ymax = ymax + pad;
  return f;
}

// The title, the grid with its ticks' values, the frame, the axes' labels, and a note when
// there is nothing to draw.
std::string axes_svg(const Frame& f, const PlotOptions& o) {
  const double kLeft = Frame::kLeft, kTop = f.top, pw = f.pw, ph = f.ph;
  std::string svg;
  if (!o.title.empty())
    svg += "<text x=\"" + num(kLeft + pw / 2) + "\" y=\"24\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"600\">" +
           escape(o.title) + "</text>";
  const double ys = nice_step(f.ymax - f.ymin, 5);
  for (double v = std::ceil(f.ymin / ys) * ys; v <= f.ymax + 1e-12; v += ys) {
    svg += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(f.Y(v)) + "\" x2=\"" + num(kLeft + pw) + "\" y2=\"" + num(f.Y(v)) +
           "\" stroke=\"#e5e5e5\"/><text x=\"" + num(kLeft - 6) + "\" y=\"" + num(f.Y(v) + 4) +
           "\" text-anchor=\"end\" font-size=\"11\" fill=\"#555\">" + value_text(std::abs(v) < ys * 1e-9 ? 0 : v) + "</text>";
  }
  const double xs = nice_step(f.xmax - f.xmin, std::max(2, static_cast<int>(pw / 90)));
  for (double v = std::ceil(f.xmin / xs) * xs; v <= f.xmax + 1e-12; v += xs)
    svg += "<line x1=\"" + num(f.X(v)) + "\" y1=\"" + num(kTop) + "\" x2=\"" + num(f.X(v)) + "\" y2=\"" + num(kTop + ph) +
           "\" stroke=\"#f0f0f0\"/><text x=\"" + num(f.X(v)) + "\" y=\"" + num(kTop + ph + 16) +
           "\" text-anchor=\"middle\" font-size=\"11\" fill=\"#555\">" + value_text(std::abs(v) < xs * 1e-9 ? 0 : v) + "</text>";
  svg += "<rect x=\"" + num(kLeft) + "\" y=\"" + num(kTop) + "\" width=\"" + num(pw) + "\" height=\"" + num(ph) +
         "\" fill=\"none\" stroke=\"#999\"/>";
  svg += "<text x=\"" + num(kLeft + pw / 2) + "\" y=\"" + num(kTop + ph + 34) + "\" text-anchor=\"middle\" font-size=\"12\">" +
         escape(o.x_label) + "</text>";
  svg += "<text x=\"14\" y=\"" + num(kTop + ph / 2) + "\" text-anchor=\"middle\" font-size=\"12\" transform=\"rotate(-90 14 " +
         num(kTop + ph / 2) + ")\">" + escape(o.y_label) + "</text>";
  if (f.empty)
    svg += "<text x=\"" + num(kLeft + pw / 2) + "\" y=\"" + num(kTop + ph / 2) +
           "\" text-anchor=\"middle\" font-size=\"13\" fill=\"#888\">no values to draw</text>";
  return svg;
}

// Series k: its band, its curve (broken at non-finite points) and, with a legend, its points
// (with their values on hover) and its legend entry; without one, the curve's title names it.
std::string series_svg(const PlotSeries& s, size_t k, const Frame& f, const PlotOptions& o, bool legend) {
  const double kLeft = Frame::kLeft;
  const std::string colour = s.colour.empty() ? kColours[k % std::size(kColours)] : escape(s.colour);
  const std::string id = escape(s.id);
  const std::string dash = s.dashed ? "\" stroke-dasharray=\"7 4" : "";
  const std::vector<size_t> keep = downsample(s.x, s.y, f.xmin, f.xmax, static_cast<int>(f.pw));
  std::string svg = "<g class=\"series\" data-series=\"" + id + "\">";
  if (!s.lo.empty() && !keep.empty()) {
    std::string band;
    for (size_t i : keep) band += (band.empty() ? "M" : "L") + num(f.X(s.x[i])) + "," + num(f.Y(s.hi[i]));
    for (auto it = keep.rbegin(); it != keep.rend(); ++it) band += "L" + num(f.X(s.x[*it])) + "," + num(f.Y(s.lo[*it]));
    svg += "<path class=\"band\" d=\"" + band + "Z\" fill=\"" + colour + "\" fill-opacity=\"0.18\" stroke=\"none\"/>";
  }
  std::string d;
  bool pen_down = false;
  for (size_t i : keep) {
    if (!std::isfinite(s.y[i]) || !std::isfinite(s.x[i])) {
      pen_down = false;
      continue;
    }
    d += (pen_down ? "L" : "M") + num(f.X(s.x[i])) + "," + num(f.Y(s.y[i]));
    pen_down = true;
  }
  svg += "<path class=\"curve\" data-series=\"" + id + "\" d=\"" + (d.empty() ? "M0,0" : d) + "\" fill=\"none\" stroke=\"" + colour +
         "\" stroke-width=\"" + (legend ? "1.8" : "1.2") + dash + "\">" + (legend ? "" : "<title>" + escape(s.label) + "</title>") + "</path>";
  if (!legend) return svg + "</g>";
  for (size_t i : keep) {
    if (!std::isfinite(s.y[i]) || !std::isfinite(s.x[i])) continue;
    svg += "<circle class=\"point\" cx=\"" + num(f.X(s.x[i])) + "\" cy=\"" + num(f.Y(s.y[i])) + "\" r=\"3\" fill=\"" + colour +
           "\" fill-opacity=\"" + (o.markers ? "1" : "0") + "\"><title>" + escape(s.label) + "\n" + escape(o.x_label) + " " +
           value_text(s.x[i]) + ": " + value_text(s.y[i]) + "</title></circle>";
  }
  svg += "</g>";
  const double ly = o.height + Frame::kLegendLine * static_cast<double>(k) + 4;
  svg += "<g class=\"legend\" data-series=\"" + id + "\"><line x1=\"" + num(kLeft) + "\" y1=\"" + num(ly + 5) + "\" x2=\"" +
         num(kLeft + 22) + "\" y2=\"" + num(ly + 5) + "\" stroke=\"" + colour + "\" stroke-width=\"3" + dash + "\"/><text x=\"" +
         num(kLeft + 28) + "\" y=\"" + num(ly + 9) + "\" font-size=\"12\">" + escape(s.label) + "</text></g>";
  return svg;
}

}  // namespace

std::string line_plot_svg(const std::vector<PlotSeries>& series, const PlotOptions& o) {
  check_plot_arguments(series, o);
  const Frame f = plot_frame(series, o);
  const bool legend = series.size() <= kMaxLegendSeries;
  const std::string width = std::to_string(o.width);
  const double total_h = o.height + Frame::kLegendLine * static_cast<double>(legend ? series.size() : 1) + 8;
  std::string svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" width=\"" + width + "\" height=\"" + num(total_h) +
                    "\" viewBox=\"0 0 " + width + " " + num(total_h) + "\" font-family=\"sans-serif\">";
  svg += "<rect x=\"0\" y=\"0\" width=\"" + width + "\" height=\"" + num(total_h) + "\" fill=\"#fff\"/>";
  svg += axes_svg(f, o);
  for (size_t k = 0; k < series.size(); ++k) svg += series_svg(series[k], k, f, o, legend);
  if (!legend)
    svg += "<text class=\"legend-count\" x=\"" + num(Frame::kLeft) + "\" y=\"" + num(o.height + 13) + "\" font-size=\"12\">" +
           std::to_string(series.size()) + " series: hover a curve for its name</text>";
  svg += "</svg>";
  return svg;
}

std::string learning_curves_svg(const History& h, const std::string& title) {
  // panels: each base name (series without the val_ prefix), loss first, lr excluded
  std::vector<std::string> names;
  for (const auto& [k, v] : h.series) {
    const std::string base = k.rfind("val_", 0) == 0 ? k.substr(4) : k;
    if (base == "lr" || std::find(names.begin(), names.end(), base) != names.end()) continue;
    names.push_back(base);
  }
  std::stable_sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) { return a == "loss" && b != "loss"; });
  constexpr int kPanelW = 440, kPanelH = 300;
  constexpr double kPanelTotalH = kPanelH + 2 * 18 + 8;  // line_plot_svg's legend: two lines
  const size_t cols = std::min<size_t>(std::max<size_t>(names.size(), 1), 3);
  const size_t rows = (names.size() + cols - 1) / std::max<size_t>(cols, 1);
  const double W = kPanelW * static_cast<double>(cols), H = 44 + kPanelTotalH * static_cast<double>(std::max<size_t>(rows, 1));
  std::string svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(W) +
                    "\" height=\"" + num(H) + "\" viewBox=\"0 0 " + num(W) + " " + num(H) +
                    "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + num(W / 2) + "\" y=\"28\" text-anchor=\"middle\" font-size=\"18\" font-weight=\"700\" fill=\"#222\">" +
         escape(title) + "</text>\n";
  for (size_t i = 0; i < names.size(); ++i) {
    std::vector<PlotSeries> series;
    for (const bool val : {false, true}) {
      const std::string key = val ? "val_" + names[i] : names[i];
      if (!h.has(key)) continue;
      PlotSeries s{.id = key, .label = val ? "validation" : "train", .dashed = val, .colour = kColours[val ? 1 : 0]};
      for (size_t e = 0; e < h[key].size(); ++e) {
        s.x.push_back(static_cast<double>(e + 1));
        s.y.push_back(std::isfinite(h[key][e]) ? h[key][e] : std::numeric_limits<double>::quiet_NaN());
      }
      series.push_back(std::move(s));
    }
    svg += "<g transform=\"translate(" + num(kPanelW * static_cast<double>(i % cols)) + " " +
           num(44 + kPanelTotalH * static_cast<double>(i / cols)) + ")\">" +
           line_plot_svg(series, {.title = pretty(names[i]), .x_label = "epoch", .y_label = names[i], .width = kPanelW, .height = kPanelH,
                                  .markers = true}) +
           "</g>\n";
  }
  return svg + "</svg>\n";
}

void save_learning_curves(const History& h, const std::string& path, const std::string& title) {
  write_file_atomic(path, learning_curves_svg(h, title));
}

}  // namespace loom::train
