#pragma once
// Shared by the libFuzzer targets (tests/fuzz/fuzz_*.cpp) and the seed writer (make_seeds.cpp).
// docs/testing.md describes the targets, the seeds and scripts/fuzz.sh.
#include <loom/loom.h>
#include <loom/train/model.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <typeinfo>

namespace loom_fuzz {

// Settings every target wants once: one thread (deterministic runs, no pool to spin up).
void init();

// The input as a file for the readers that take a path: an anonymous memory file (memfd_create)
// opened again through /proc/self/fd/N, so that every layer of the reader (gzip detection, stat,
// pread) sees a regular file, with no disk I/O and nothing to clean up.
class MemFile {
 public:
  MemFile(const uint8_t* data, size_t size);
  ~MemFile();
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// Runs f on one input. A loom::Error is the documented answer to bad input; any other exception
// (a raw std:: or nlohmann exception escaping) is a finding: it aborts, naming the exception, so
// that libFuzzer saves the input.
template <typename F>
void expect_loom_errors(const char* target, F&& f) {
  try {
    f();
  } catch (const loom::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: an exception that is not a loom::Error escaped: %s: %s\n", target, typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "%s: a non-std exception escaped\n", target);
    std::abort();
  }
}

// A request to a server's handler as the server targets (fuzz_serve, fuzz_text_serve) read it
// from an input of at least one byte: the first byte chooses the method, the path runs to the
// first newline, the rest is the body.
struct Request {
  std::string method, path, body;
};
Request split_request(const uint8_t* data, size_t size);

// The graph and training setup behind the state and checkpoint targets and their seeds: the
// files the seed writer saves from them load into them.
struct Net {
  loom::nn::Input x{4, loom::Float32, "x"};
  loom::nn::Linear h{x, 6, {}, "h"};
  loom::nn::BatchNorm bn{h, {}, "bn"};
  loom::nn::Activation a{bn, loom::nn::relu, "a"};
  loom::nn::Linear out{a, 3, {}, "out"};
  loom::Graph graph = loom::Graph::build({out}, {x});
};
loom::train::Model make_model(const Net& net);
// 24 examples of 4 features with labels in [0, 3).
std::shared_ptr<loom::data::TensorDataset> toy_data();

}  // namespace loom_fuzz
