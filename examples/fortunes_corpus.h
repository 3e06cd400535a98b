#pragma once
// The text examples' corpus: the fortune cookies of Debian's `fortunes` package, one file per
// topic in /usr/share/games/fortunes beside its .dat index and .u8 link, which are skipped.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

// The corpus's text files, in name order (the same corpus order on every machine).
inline std::vector<std::filesystem::path> fortune_files(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() != ".dat" && e.path().extension() != ".u8") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

// The text examples' command line, `PROGRAM [--short] [CORPUS_DIR]`; a missing corpus ends the
// program with a message saying where it comes from.
struct CorpusArgs {
  bool short_run = false;
  std::filesystem::path dir = "/usr/share/games/fortunes";
};

inline CorpusArgs corpus_args(int argc, char** argv, const char* program) {
  CorpusArgs args;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--short") args.short_run = true;
    else args.dir = a;
  }
  if (!std::filesystem::is_directory(args.dir)) {
    std::fprintf(stderr, "%s: no corpus at %s (Debian's `fortunes` package; scripts/setup.sh installs it)\n", program,
                 args.dir.c_str());
    std::exit(1);
  }
  return args;
}
