#pragma once
// ImageFolder: a dataset of JPEG and PNG files, one class per sub-folder (torchvision's
// ImageFolder, Keras' image_dataset_from_directory) or listed with their labels in a file.
//
//   root/cat/001.jpg, root/cat/x/002.png, root/dog/abc.jpeg  ->  classes {"cat", "dog"}, labels 0, 0, 1
//
// Examples are {image, label}: the image decoded (in the DataLoader's worker threads when it has
// any), converted to the mode's channels, resized when `size` is set, as float32 (C, H, W) in
// [0, 1] (torchvision's ToTensor); the label an int64 scalar.
#include <cstdint>
#include <string>
#include <vector>

#include "loom/core/api.h"
#include "loom/data/dataset.h"
#include "loom/data/image.h"
#include "loom/data/transforms.h"

namespace loom::data {

struct LOOM_API ImageFolderOptions {
  // File name endings that count as images, compared ignoring ASCII case; other files are skipped.
  std::vector<std::string> extensions = {".jpg", ".jpeg", ".png"};
  ImageMode mode = ImageMode::RGB;
  // Resize on decoding (data::resize's sizes: {} keeps each image's size, {s} the shorter side to
  // s, {height, width} exactly), straight from the decoded 8-bit pixels.
  std::vector<int64_t> size;
  bool antialias = true;
  // Applied to each example ({image, label} as a batch of one, Transform::apply_example) after
  // decoding and resizing, with a Generator seeded by (seed, index): random transforms here draw
  // the same for an example in every epoch; per-epoch augmentation belongs in the DataLoader's
  // transform, which runs on the collated batch.
  Transform transform;
  uint64_t seed = 0;
  // Images declaring more pixels are refused before decoding (ImageReadOptions::max_pixels).
  int64_t max_pixels = kDefaultMaxImagePixels;
};

class LOOM_API ImageFolder : public Dataset {
 public:
  struct Sample {
    std::string path;
    int64_t label;
  };

  // One class per sub-folder of `root`, named by the folder: class indices follow the folders'
  // names sorted bytewise (as torchvision sorts them); each class holds the files with one of the
  // extensions anywhere below its folder, sorted by path. Files directly in `root` are skipped,
  // as are sub-folders reached through symbolic links. Throws IOError when `root` is not a
  // directory, has no sub-folder, or a class folder holds no image (naming the class and the
  // extensions).
  explicit ImageFolder(const std::string& root, ImageFolderOptions options = {});

  // The images listed in a text file, one "path label" line each (the label is the last field,
  // separated by a space, tab or comma; blank lines and lines starting with '#' are skipped).
  // Relative paths are relative to `root`, by default the list file's folder. Labels are either
  // all non-negative integers (used as they are; the classes are "0" to the largest) or all names
  // (the classes are the names sorted, as folders are). The extensions are not applied.
  static ImageFolder from_list(const std::string& list_file, ImageFolderOptions options = {}, std::string root = "");

  int64_t size() const override { return static_cast<int64_t>(samples_.size()); }
  Example get(int64_t i) const override;
  // Without a per-example transform, images are resized straight into the batch (the result
  // equals collate of get(); images of different sizes are a ShapeError naming the file).
  Batch get_batch(const std::vector<int64_t>& indices) const override;

  const std::vector<std::string>& classes() const { return classes_; }
  // The index of a class name; throws ValueError for a name that is not a class.
  int64_t class_index(const std::string& name) const;
  const std::vector<Sample>& samples() const { return samples_; }
  const ImageFolderOptions& options() const { return options_; }

 private:
  ImageFolder(std::vector<Sample> samples, std::vector<std::string> classes, ImageFolderOptions options);
  void check_index(int64_t i) const;
  std::vector<Sample> samples_;
  std::vector<std::string> classes_;
  ImageFolderOptions options_;
};

}  // namespace loom::data
