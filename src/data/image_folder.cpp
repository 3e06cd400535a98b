#include "loom/data/image_folder.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <map>
#include <system_error>

#include "data/image_codec.h"
#include "data/resize.h"
#include "loom/core/file.h"
#include "loom/ops/creation.h"
#include "loom/ops/random.h"

namespace loom::data {

namespace fs = std::filesystem;

namespace {

std::string lower(std::string s) {
  for (char& ch : s)
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
  return s;
}

bool has_extension(const std::string& name, const std::vector<std::string>& extensions) {
  const std::string l = lower(name);
  for (const std::string& e : extensions) {
    const std::string le = lower(e);
    if (l.size() >= le.size() && l.compare(l.size() - le.size(), le.size(), le) == 0) return true;
  }
  return false;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

void check_options(const ImageFolderOptions& o) {
  if (o.extensions.empty()) throw ValueError("ImageFolder: extensions is empty (valid: endings such as \".jpg\", \".png\")");
  if (o.max_pixels < 1) throw ValueError("ImageFolder: max_pixels must be >= 1, got " + std::to_string(o.max_pixels));
  if (!o.size.empty()) detail::resize_target(1, 1, o.size, "ImageFolder");
}

}  // namespace

ImageFolder::ImageFolder(std::vector<Sample> samples, std::vector<std::string> classes, ImageFolderOptions options)
    : samples_(std::move(samples)), classes_(std::move(classes)), options_(std::move(options)) {}

ImageFolder::ImageFolder(const std::string& root, ImageFolderOptions options) : options_(std::move(options)) {
  check_options(options_);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) throw IOError("ImageFolder: '" + root + "' is not a directory");
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec)) classes_.push_back(it->path().filename().string());
  if (ec) throw IOError("ImageFolder: cannot list '" + root + "': " + ec.message());
  if (classes_.empty()) throw IOError("ImageFolder: '" + root + "' has no sub-folder (valid: one folder per class)");
  std::sort(classes_.begin(), classes_.end());
  std::vector<std::string> empty_classes;
  for (size_t c = 0; c < classes_.size(); ++c) {
    // torchvision's order: folders sorted by path, each folder's files sorted by name
    std::vector<std::pair<std::string, std::string>> found;  // (folder, file name)
    const fs::path dir = fs::path(root) / classes_[c];
    for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      std::error_code fec;
      if (!it->is_regular_file(fec) || !has_extension(it->path().filename().string(), options_.extensions)) continue;
      found.emplace_back(it->path().parent_path().string(), it->path().filename().string());
    }
    if (ec) throw IOError("ImageFolder: cannot list '" + dir.string() + "': " + ec.message());
    if (found.empty()) empty_classes.push_back(classes_[c]);
    std::sort(found.begin(), found.end());
    for (const auto& [folder, name] : found) samples_.push_back({(fs::path(folder) / name).string(), static_cast<int64_t>(c)});
  }
  if (!empty_classes.empty())
    throw IOError("ImageFolder: no image in the folder of class " + joined(empty_classes) + " under '" + root +
                  "' (files ending in " + joined(options_.extensions) + " count as images)");
}

ImageFolder ImageFolder::from_list(const std::string& list_file, ImageFolderOptions options, std::string root) {
  check_options(options);
  const std::string text = read_file(list_file);
  if (root.empty()) root = fs::path(list_file).parent_path().string();
  std::vector<std::pair<std::string, std::string>> entries;  // (path, label)
  size_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string line = trim(text.substr(pos, nl - pos));
    pos = nl + 1;
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    const size_t sep = line.find_last_of(" \t,");
    const std::string path = sep == std::string::npos ? "" : trim(line.substr(0, sep));
    const std::string label = sep == std::string::npos ? "" : trim(line.substr(sep + 1));
    if (path.empty() || label.empty())
      throw IOError("ImageFolder::from_list: '" + list_file + "' line " + std::to_string(line_no) + ": '" + line +
                    "' is not 'path label' (valid: a path, a space, tab or comma, and a label)");
    entries.emplace_back(path, label);
  }
  if (entries.empty()) throw IOError("ImageFolder::from_list: '" + list_file + "' lists no image");
  bool numeric = true;
  std::vector<int64_t> ids(entries.size());
  for (size_t i = 0; i < entries.size() && numeric; ++i) {
    const std::string& l = entries[i].second;
    const auto [end, err] = std::from_chars(l.data(), l.data() + l.size(), ids[i]);
    numeric = err == std::errc() && end == l.data() + l.size() && ids[i] >= 0;
  }
  std::vector<std::string> classes;
  if (numeric) {
    const int64_t top = *std::max_element(ids.begin(), ids.end());
    if (top >= (int64_t{1} << 24))
      throw IOError("ImageFolder::from_list: '" + list_file + "' has label " + std::to_string(top) +
                    " (valid: integer labels below 16777216, or class names)");
    for (int64_t k = 0; k <= top; ++k) classes.push_back(std::to_string(k));
  } else {
    std::map<std::string, int64_t> index;
    for (const auto& e : entries) index.emplace(e.second, 0);
    for (auto& [name, k] : index) {
      k = static_cast<int64_t>(classes.size());
      classes.push_back(name);
    }
    for (size_t i = 0; i < entries.size(); ++i) ids[i] = index.at(entries[i].second);
  }
  std::vector<Sample> samples;
  samples.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const fs::path p(entries[i].first);
    samples.push_back({p.is_absolute() || root.empty() ? p.string() : (fs::path(root) / p).string(), ids[i]});
  }
  return ImageFolder(std::move(samples), std::move(classes), std::move(options));
}

int64_t ImageFolder::class_index(const std::string& name) const {
  const auto it = std::find(classes_.begin(), classes_.end(), name);
  if (it == classes_.end()) throw ValueError("ImageFolder: '" + name + "' is not a class (classes: " + joined(classes_) + ")");
  return it - classes_.begin();
}

namespace {

detail::DecodedImage decode(const ImageFolder::Sample& s, const ImageFolderOptions& o) {
  const std::string bytes = read_file(s.path);
  return detail::decode_hwc(bytes.data(), bytes.size(), {o.mode, o.max_pixels}, s.path);
}

std::pair<int64_t, int64_t> target(const detail::DecodedImage& img, const ImageFolderOptions& o) {
  return o.size.empty() ? std::pair{img.height, img.width} : detail::resize_target(img.height, img.width, o.size, "ImageFolder");
}

}  // namespace

void ImageFolder::check_index(int64_t i) const {
  if (i < 0 || i >= size())
    throw IndexError("ImageFolder: index " + std::to_string(i) + " is out of range for " + std::to_string(size()) + " images");
}

Example ImageFolder::get(int64_t i) const {
  check_index(i);
  const Sample& s = samples_[static_cast<size_t>(i)];
  const detail::DecodedImage img = decode(s, options_);
  const auto [oh, ow] = target(img, options_);
  Tensor image = empty({img.channels, oh, ow}, Float32, Device::cpu());
  detail::resize_hwc_u8(img.pixels.get(), img.height, img.width, img.channels, image.data<float>(), oh, ow, 1.0f / 255.0f,
                        options_.antialias);
  Example ex{image, scalar_tensor(s.label, Int64, Device::cpu())};
  if (options_.transform.is_identity()) return ex;
  Generator gen(Generator::mix(options_.seed, static_cast<uint64_t>(i)));
  return options_.transform.apply_example(std::move(ex), gen);
}

Batch ImageFolder::get_batch(const std::vector<int64_t>& indices) const {
  // Without a per-example transform the images are resized straight into the batch (no copy
  // by collate); the result is what collate of get() would give.
  if (!options_.transform.is_identity() || indices.empty()) return Dataset::get_batch(indices);
  for (int64_t i : indices) check_index(i);
  const auto n = static_cast<int64_t>(indices.size());
  Tensor images, labels = empty({n}, Int64, Device::cpu());
  int64_t c = 0, oh = 0, ow = 0;
  for (int64_t j = 0; j < n; ++j) {
    const Sample& s = samples_[static_cast<size_t>(indices[static_cast<size_t>(j)])];
    const detail::DecodedImage img = decode(s, options_);
    const auto [h, w] = target(img, options_);
    if (j == 0) {
      c = img.channels, oh = h, ow = w;
      images = empty({n, c, oh, ow}, Float32, Device::cpu());
    } else if (img.channels != c || h != oh || w != ow) {
      throw ShapeError("ImageFolder: '" + s.path + "' gives an image of shape " + shape_str({img.channels, h, w}) +
                       " but the first of its batch " + shape_str({c, oh, ow}) +
                       " (images of different sizes are batched after resizing to one size: ImageFolderOptions::size {height, width})");
    }
    detail::resize_hwc_u8(img.pixels.get(), img.height, img.width, img.channels, images.data<float>() + j * c * oh * ow, oh, ow,
                          1.0f / 255.0f, options_.antialias);
    labels.data<int64_t>()[j] = s.label;
  }
  return {images, labels};
}

}  // namespace loom::data
