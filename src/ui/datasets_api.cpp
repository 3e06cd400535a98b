// The datasets page's API (docs/ui.md, "Datasets"): versions, fields, a sample query in a small
// text form of the store's SampleQuery, and image previews of image-shaped fields.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include "core/utf8.h"
#include "loom/core/shape.h"
#include "loom/data/image.h"
#include "loom/ops/creation.h"
#include "loom/store/datasets.h"
#include "loom/store/error.h"
#include "ui/api.h"

namespace loom::ui::detail {

namespace {

using loom::detail::quote_text;

constexpr const char* kQueryHelp =
    "valid: clauses joined by 'and': KEY OP VALUE (OP one of < <= == != >= >, VALUE a number or a \"string\"), "
    "#TAG, and at the end 'order by KEY [asc|desc]'; e.g. label >= 3 and #test order by label desc";

// The text form of a SampleQuery (kQueryHelp).
store::SampleQuery parse_query(const std::string& text) {
  std::vector<std::string> tokens;
  size_t i = 0;
  auto fail = [&](const std::string& what) { throw HttpError(400, "query " + quote_text(text) + ": " + what + " (" + kQueryHelp + ")"); };
  while (i < text.size()) {
    const char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c))) { ++i; continue; }
    if (c == '"') {
      const size_t j = text.find('"', i + 1);
      if (j == std::string::npos) fail("a string is not closed");
      tokens.push_back(text.substr(i, j - i + 1));
      i = j + 1;
    } else if (std::string("<>=!").find(c) != std::string::npos) {
      size_t j = i + 1;
      if (j < text.size() && text[j] == '=') ++j;
      tokens.push_back(text.substr(i, j - i));
      i = j;
    } else {
      size_t j = i;
      while (j < text.size() && !std::isspace(static_cast<unsigned char>(text[j])) && std::string("<>=!\"").find(text[j]) == std::string::npos) ++j;
      tokens.push_back(text.substr(i, j - i));
      i = j;
    }
  }
  store::SampleQuery q;
  size_t k = 0;
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  while (k < tokens.size()) {
    if (lower(tokens[k]) == "order") {
      if (k + 2 >= tokens.size() || lower(tokens[k + 1]) != "by") fail("'order' must be followed by 'by KEY'");
      q.order_by = tokens[k + 2];
      k += 3;
      if (k < tokens.size()) {
        const std::string dir = lower(tokens[k]);
        if (dir != "asc" && dir != "desc") fail("after 'order by KEY' only 'asc' or 'desc' may follow");
        q.descending = dir == "desc";
        ++k;
      }
      if (k < tokens.size()) fail("'order by' must come last");
      break;
    }
    if (tokens[k].size() > 1 && tokens[k][0] == '#') {
      q.tags.push_back(tokens[k].substr(1));
      ++k;
    } else {
      if (k + 2 >= tokens.size()) fail("incomplete clause after " + quote_text(tokens[k]));
      const std::string& key = tokens[k];
      const std::string& op = tokens[k + 1];
      const std::string& value = tokens[k + 2];
      if (op != "<" && op != "<=" && op != "==" && op != "!=" && op != ">=" && op != ">") fail("unknown operator " + quote_text(op));
      if (value.size() >= 2 && value.front() == '"') {
        q.where.push_back({key, op, store::MetaValue(value.substr(1, value.size() - 2))});
      } else {
        double v = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
        if (ec != std::errc() || end != value.data() + value.size() || !std::isfinite(v)) fail("the value " + quote_text(value) + " is neither a number nor a \"string\"");
        q.where.push_back({key, op, store::MetaValue(v)});
      }
      k += 3;
    }
    if (k < tokens.size() && lower(tokens[k]) == "and") {
      ++k;
      if (k == tokens.size()) fail("nothing after 'and'");
    } else if (k < tokens.size() && lower(tokens[k]) != "order") {
      fail("expected 'and' or 'order by' before " + quote_text(tokens[k]));
    }
  }
  return q;
}

// A field drawn as an image: uint8 or floating (C, H, W) with C 1 or 3, or (H, W), sides 2 to 4096.
bool image_shaped(const Shape& s) {
  auto side = [](int64_t d) { return d >= 2 && d <= 4096; };
  if (s.size() == 2) return side(s[0]) && side(s[1]);
  return s.size() == 3 && (s[0] == 1 || s[0] == 3) && side(s[1]) && side(s[2]);
}

// The PNG of an image-shaped tensor: uint8 as is, other dtypes scaled from their min..max.
std::string png_of(const Tensor& t) {
  Tensor chw = t.ndim() == 2 ? t.reshape({1, t.shape()[0], t.shape()[1]}) : t;
  if (chw.dtype() != UInt8) {
    const Tensor d = chw.astype(Float64).contiguous();
    const double* v = static_cast<const double*>(d.data_ptr());
    const int64_t n = d.numel();
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < n; ++i)
      if (std::isfinite(v[i])) lo = std::min(lo, v[i]), hi = std::max(hi, v[i]);
    Tensor u = empty(d.shape(), UInt8);
    auto* out = static_cast<uint8_t*>(u.data_ptr());
    for (int64_t i = 0; i < n; ++i)
      out[i] = !std::isfinite(v[i]) || !(hi > lo) ? 0 : static_cast<uint8_t>(std::lround((v[i] - lo) / (hi - lo) * 255));
    chw = u;
  }
  return data::encode_png(chw.contiguous());
}

int64_t version_of(const std::string& text, const std::string& what) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0)
    throw HttpError(400, what + " " + quote_text(text) + " is not a number (valid: 0, 1, 2, ...)");
  return v;
}

// The version's record (loom/store/record.h, the keys `loom datasets --json` prints), each field
// marked whether the page can draw it as an image.
nlohmann::json version_json(const store::DatasetInfo& d) {
  nlohmann::json out = store::record_json<nlohmann::json>(d);
  for (size_t i = 0; i < d.schema.size(); ++i) out["fields"][i]["image"] = image_shaped(d.schema[i].shape);
  return out;
}

template <class F>
auto or_404(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const store::NotFoundError& e) {
    throw HttpError(404, e.what());
  }
}

}  // namespace

Response datasets_api(store::Store& store, const Request& r, const std::vector<std::string>& p) {
  if (r.method != "GET") throw HttpError(405, "use GET for " + r.path);
  if (p.size() == 1) {
    only_params(r, {});
    nlohmann::json list = nlohmann::json::array();
    for (const std::string& name : store.datasets().names()) {
      const auto versions = store.datasets().versions(name);
      if (!versions.empty()) list.push_back({{"name", name}, {"versions", versions.size()}, {"latest", versions.back().version}});
    }
    return json_response({{"datasets", list}});
  }
  const std::string& name = p[1];
  if (p.size() == 2) {
    only_params(r, {});
    const auto versions = store.datasets().versions(name);
    if (versions.empty()) throw HttpError(404, "no dataset " + quote_text(name) + " in the store (GET /api/datasets lists them)");
    nlohmann::json list = nlohmann::json::array();
    for (const auto& d : versions) list.push_back(version_json(d));
    return json_response({{"name", name}, {"versions", list}});
  }
  if (p.size() >= 4 && p[3] == "samples") {
    const int64_t version = version_of(p[2], "dataset " + quote_text(name) + ": version");
    const store::DatasetInfo info = or_404([&] { return store.datasets().get(name, version); });
    if (p.size() == 4) {
      only_params(r, {"query", "limit", "offset"});
      store::SampleQuery q = parse_query(param(r, "query").value_or(""));
      q.limit = int_param(r, "limit", 24, 1, 200);
      q.offset = int_param(r, "offset", 0, 0, std::numeric_limits<int32_t>::max());
      std::shared_ptr<store::DatasetView> view;
      try {
        view = store.datasets().query(name, version, q);
      } catch (const ValueError& e) {
        throw HttpError(400, std::string(e.what()) + " (" + kQueryHelp + ")");
      }
      nlohmann::json samples = nlohmann::json::array();
      for (int64_t i = 0; i < view->size(); ++i)
        samples.push_back({{"index", view->index(i)}, {"metadata", parse_object(view->metadata(i))}, {"tags", view->tags(i)}});
      nlohmann::json fields = nlohmann::json::array();
      for (const auto& f : info.schema) fields.push_back({{"name", f.name}, {"shape", f.shape}, {"image", image_shaped(f.shape)}});
      return json_response({{"name", name}, {"version", version}, {"offset", q.offset}, {"fields", fields}, {"samples", samples}});
    }
    // /api/datasets/NAME/VERSION/samples/INDEX/FIELD.png
    if (p.size() == 6 && p[5].size() > 4 && p[5].ends_with(".png")) {
      only_params(r, {});
      const int64_t index = version_of(p[4], "sample index");
      if (index >= info.samples)
        throw HttpError(404, "dataset " + quote_text(name) + " version " + std::to_string(version) + " has " +
                                 std::to_string(info.samples) + " samples (valid indices: 0 to " + std::to_string(info.samples - 1) + ")");
      const std::string field = p[5].substr(0, p[5].size() - 4);
      const auto f = std::find_if(info.schema.begin(), info.schema.end(), [&](const store::FieldInfo& x) { return x.name == field; });
      if (f == info.schema.end() || !image_shaped(f->shape)) {
        std::string valid;
        for (const auto& x : info.schema)
          if (image_shaped(x.shape)) valid += (valid.empty() ? "" : ", ") + x.name;
        throw HttpError(404, "dataset " + quote_text(name) + " has no image-shaped field " + quote_text(field) +
                                 " (valid: " + (valid.empty() ? "none" : valid) + ")");
      }
      store::SampleQuery one;
      one.offset = index;
      one.limit = 1;
      one.fields = {field};
      const auto view = store.datasets().query(name, version, one);
      return {200, "image/png", png_of(view->sample(0).tensors.at(field)), {}};
    }
  }
  throw HttpError(404, "no route " + quote_text(r.path) +
                           " (valid: /api/datasets, /api/datasets/NAME, /api/datasets/NAME/VERSION/samples, "
                           "/api/datasets/NAME/VERSION/samples/INDEX/FIELD.png)");
}

}  // namespace loom::ui::detail
