// Hand-written SVG: panels with nice axis ticks, a light grid, train (solid) and validation
// (dashed) lines with point markers, and a legend.
#include "loom/train/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "loom/core/file.h"

namespace loom::train {

namespace {

constexpr double kPanelW = 440, kPanelH = 300, kLeft = 64, kRight = 18, kTop = 40, kBottom = 48;
const char* kTrainColour = "#1f77b4";
const char* kValColour = "#d62728";

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}

// Axis label text: few significant digits, no trailing zeros.
std::string tick_label(double v, double step) {
  char b[32];
  const int decimals = step >= 1 ? 0 : std::min(6, static_cast<int>(std::ceil(-std::log10(step))));
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

// 1, 2 or 5 times a power of ten, giving about `target` intervals.
double nice_step(double span, int target) {
  const double raw = span / target;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (raw <= m * p) return m * p;
  return 10 * p;
}

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else o += c;
  }
  return o;
}

std::string pretty(const std::string& name) {
  std::string s = name;
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  std::replace(s.begin(), s.end(), '_', ' ');
  return s;
}

void panel(std::string& svg, double ox, double oy, const std::string& name, const std::vector<double>* train,
           const std::vector<double>* val) {
  std::vector<double> all;
  for (const auto* s : {train, val})
    if (s)
      for (double v : *s)
        if (std::isfinite(v)) all.push_back(v);
  const size_t n = std::max(train ? train->size() : 0, val ? val->size() : 0);
  const double pw = kPanelW - kLeft - kRight, ph = kPanelH - kTop - kBottom;
  double lo = all.empty() ? 0 : *std::min_element(all.begin(), all.end());
  double hi = all.empty() ? 1 : *std::max_element(all.begin(), all.end());
  if (hi - lo < 1e-12) {
    lo -= 0.5;
    hi += 0.5;
  }
  const double step = nice_step(hi - lo, 5);
  lo = std::floor(lo / step) * step;
  hi = std::ceil(hi / step) * step;
  const double x0 = ox + kLeft, y0 = oy + kTop;
  auto X = [&](size_t i) { return x0 + (n <= 1 ? pw / 2 : pw * static_cast<double>(i) / static_cast<double>(n - 1)); };
  auto Y = [&](double v) { return y0 + ph * (1 - (v - lo) / (hi - lo)); };

  svg += "<text x=\"" + num(ox + kPanelW / 2) + "\" y=\"" + num(oy + 24) +
         "\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"600\">" + escape(pretty(name)) + "</text>\n";
  // grid and y ticks
  for (double v = lo; v <= hi + step / 2; v += step) {
    svg += "<line x1=\"" + num(x0) + "\" y1=\"" + num(Y(v)) + "\" x2=\"" + num(x0 + pw) + "\" y2=\"" + num(Y(v)) +
           "\" stroke=\"#e6e6e6\"/>\n";
    svg += "<text x=\"" + num(x0 - 8) + "\" y=\"" + num(Y(v) + 4) + "\" text-anchor=\"end\" font-size=\"11\" fill=\"#555\">" +
           tick_label(v, step) + "</text>\n";
  }
  // x ticks: epochs 1..n, thinned to at most ~10 labels
  const size_t every = std::max<size_t>(1, (n + 9) / 10);
  for (size_t i = 0; i < n; i += every) {
    svg += "<line x1=\"" + num(X(i)) + "\" y1=\"" + num(y0 + ph) + "\" x2=\"" + num(X(i)) + "\" y2=\"" + num(y0 + ph + 4) +
           "\" stroke=\"#555\"/>\n";
    svg += "<text x=\"" + num(X(i)) + "\" y=\"" + num(y0 + ph + 17) + "\" text-anchor=\"middle\" font-size=\"11\" fill=\"#555\">" +
           std::to_string(i + 1) + "</text>\n";
  }
  svg += "<rect x=\"" + num(x0) + "\" y=\"" + num(y0) + "\" width=\"" + num(pw) + "\" height=\"" + num(ph) +
         "\" fill=\"none\" stroke=\"#888\"/>\n";
  svg += "<text x=\"" + num(x0 + pw / 2) + "\" y=\"" + num(oy + kPanelH - 10) +
         "\" text-anchor=\"middle\" font-size=\"12\" fill=\"#333\">epoch</text>\n";
  auto line = [&](const std::vector<double>* s, const char* colour, bool dashed) {
    if (!s || s->empty()) return;
    std::string pts;
    for (size_t i = 0; i < s->size(); ++i)
      if (std::isfinite((*s)[i])) pts += num(X(i)) + "," + num(Y((*s)[i])) + " ";
    svg += "<polyline points=\"" + pts + "\" fill=\"none\" stroke=\"" + colour + "\" stroke-width=\"2.2\"" +
           (dashed ? " stroke-dasharray=\"7 4\"" : "") + " stroke-linejoin=\"round\"/>\n";
    for (size_t i = 0; i < s->size(); ++i)
      if (std::isfinite((*s)[i]))
        svg += "<circle cx=\"" + num(X(i)) + "\" cy=\"" + num(Y((*s)[i])) + "\" r=\"3\" fill=\"" + colour + "\"/>\n";
  };
  line(train, kTrainColour, false);
  line(val, kValColour, true);
  // legend in the right corner the curves' ends leave free (top for falling curves)
  double tail = 0;
  int count = 0;
  for (const auto* s : {train, val})
    if (s)
      for (size_t i = s->size() * 2 / 3; i < s->size(); ++i)
        if (std::isfinite((*s)[i])) {
          tail += ((*s)[i] - lo) / (hi - lo);
          ++count;
        }
  const bool top = count == 0 || tail / count < 0.55;
  double ly = top ? y0 + 14 : y0 + ph - 34;
  for (auto [s, colour, label, dashed] : {std::tuple{train, kTrainColour, "train", false}, std::tuple{val, kValColour, "validation", true}}) {
    if (!s || s->empty()) continue;
    const double lx = x0 + pw - 110;
    svg += "<line x1=\"" + num(lx) + "\" y1=\"" + num(ly - 4) + "\" x2=\"" + num(lx + 24) + "\" y2=\"" + num(ly - 4) +
           "\" stroke=\"" + colour + "\" stroke-width=\"2.2\"" + (dashed ? " stroke-dasharray=\"7 4\"" : "") + "/>\n";
    svg += "<text x=\"" + num(lx + 30) + "\" y=\"" + num(ly) + "\" font-size=\"12\" fill=\"#333\">" + label + "</text>\n";
    ly += 18;
  }
}

}  // namespace

std::string learning_curves_svg(const History& h, const std::string& title) {
  // panels: each base name (series without the val_ prefix), loss first, lr excluded
  std::vector<std::string> names;
  for (const auto& [k, v] : h.series) {
    const std::string base = k.rfind("val_", 0) == 0 ? k.substr(4) : k;
    if (base == "lr" || std::find(names.begin(), names.end(), base) != names.end()) continue;
    names.push_back(base);
  }
  std::stable_sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) { return a == "loss" && b != "loss"; });
  const size_t cols = std::min<size_t>(std::max<size_t>(names.size(), 1), 3);
  const size_t rows = (names.size() + cols - 1) / std::max<size_t>(cols, 1);
  const double W = kPanelW * static_cast<double>(cols), H = 44 + kPanelH * static_cast<double>(std::max<size_t>(rows, 1));
  std::string svg = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(W) +
                    "\" height=\"" + num(H) + "\" viewBox=\"0 0 " + num(W) + " " + num(H) +
                    "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n";
  svg += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += "<text x=\"" + num(W / 2) + "\" y=\"28\" text-anchor=\"middle\" font-size=\"18\" font-weight=\"700\" fill=\"#222\">" +
         escape(title) + "</text>\n";
  for (size_t i = 0; i < names.size(); ++i) {
    const auto* train = h.has(names[i]) ? &h[names[i]] : nullptr;
    const auto* val = h.has("val_" + names[i]) ? &h["val_" + names[i]] : nullptr;
    panel(svg, kPanelW * static_cast<double>(i % cols), 44 + kPanelH * static_cast<double>(i / cols), names[i], train, val);
  }
  return svg + "</svg>\n";
}

void save_learning_curves(const History& h, const std::string& path, const std::string& title) {
  write_file_atomic(path, learning_curves_svg(h, title));
}

}  // namespace loom::train
