// Loom's tokenizers against PyPI tokenizers and sentencepiece (tests/text/check_tokenizers.py
// prepares DIR: the corpus, the tokenizers and models, their ids and tokenizers' encoding time).
//   loom_text_check bpe DIR   every BpeTokenizer id of the corpus equals tokenizers'; round trips;
//                             text that is not UTF-8; the encoding speed against tokenizers'
//   loom_text_check spm DIR   SentencePieceTokenizer ids equal sentencepiece's for the models
//                             Python trained; trains a model with Loom for Python to check
#include <time.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "loom/core/error.h"
#include "loom/core/file.h"
#include "loom/data/tokenizer.h"

using loom::data::BpeTokenizer;
using loom::data::SentencePieceTokenizer;

namespace {

int failures = 0;

void fail(const std::string& what) {
  std::fprintf(stderr, "FAIL: %s\n", what.c_str());
  ++failures;
}

std::vector<int32_t> read_ids(const std::string& path) {
  const std::string b = loom::read_file(path);
  std::vector<int32_t> ids(b.size() / 4);
  std::memcpy(ids.data(), b.data(), ids.size() * 4);
  return ids;
}

// Each document's ids, as the files hold them: ids, -1, ids, -1, ...
std::vector<std::vector<int32_t>> split_ids(const std::vector<int32_t>& flat) {
  std::vector<std::vector<int32_t>> out(1);
  for (int32_t id : flat) {
    if (id == -1)
      out.emplace_back();
    else
      out.back().push_back(id);
  }
  out.pop_back();
  return out;
}

// The corpus as check_tokenizers.py's documents(): 50 lines each, line ends kept.
std::vector<std::string> documents(const std::string& text, size_t lines = 50) {
  std::vector<std::string> docs;
  size_t start = 0, count = 0;
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n' && ++count == lines) {
      docs.push_back(text.substr(start, i + 1 - start));
      start = i + 1;
      count = 0;
    }
  if (start < text.size()) docs.push_back(text.substr(start));
  return docs;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i)
    if (i == text.size() || text[i] == '\n') {
      out.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  return out;
}

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

std::string show(const std::vector<int32_t>& ids, size_t from) {
  std::ostringstream s;
  for (size_t i = from; i < ids.size() && i < from + 8; ++i) s << ids[i] << ' ';
  return s.str();
}

void compare(const std::string& what, const std::vector<std::string>& docs, const std::vector<std::vector<int32_t>>& want,
             const std::vector<std::vector<int32_t>>& got) {
  if (want.size() != got.size()) return fail(what + ": " + std::to_string(want.size()) + " documents in the reference, " + std::to_string(got.size()) + " encoded");
  size_t total = 0;
  for (size_t d = 0; d < want.size(); ++d) {
    total += want[d].size();
    if (want[d] == got[d]) continue;
    size_t k = 0;
    while (k < want[d].size() && k < got[d].size() && want[d][k] == got[d][k]) ++k;
    return fail(what + ": document " + std::to_string(d) + " differs at id " + std::to_string(k) + ": reference [" +
                show(want[d], k) + "], Loom [" + show(got[d], k) + "]; the document begins '" + docs[d].substr(0, 80) + "'");
  }
  std::printf("%s: %zu documents, %zu ids, all equal\n", what.c_str(), want.size(), total);
}

int run_bpe(const std::string& dir) {
  const std::string corpus = loom::read_file(dir + "/corpus.txt");
  const auto docs = documents(corpus);
  size_t nbytes = 0;
  for (const auto& d : docs) nbytes += d.size();
  const nlohmann::json timing = nlohmann::json::parse(loom::read_file(dir + "/timing.json"));
  for (const std::string name : {"gpt2", "gpt2_prefix", "llama3"}) {
    const BpeTokenizer tok = BpeTokenizer::load(dir + "/" + name + ".json");
    std::vector<std::vector<int32_t>> got;
    for (const auto& d : docs) got.push_back(tok.encode(d));
    compare("BPE " + name, docs, split_ids(read_ids(dir + "/" + name + ".ids")), got);
    // speed: a fresh tokenizer (its cache empty), the best of 3 runs as tokenizers' was measured
    const BpeTokenizer fresh = BpeTokenizer::load(dir + "/" + name + ".json");
    double best = 1e30;
    for (int r = 0; r < 3; ++r) {
      const double t0 = cpu_seconds();
      size_t n = 0;
      for (const auto& d : docs) n += fresh.encode(d).size();
      best = std::min(best, cpu_seconds() - t0);
      if (n == 0) fail("no ids");
    }
    const double theirs = timing.at(name).get<double>();
    std::printf("BPE %s speed, one thread, CPU time: Loom %.2f MB/s, tokenizers %.2f MB/s: Loom/tokenizers %.2fx\n", name.c_str(),
                nbytes / best / 1e6, nbytes / theirs / 1e6, theirs / best);
    if (name == "gpt2_prefix") continue;
    const size_t skip = name == "llama3" ? 1 : 0;  // <|begin_of_text|>
    for (size_t d = 0; d < docs.size(); ++d) {
      const auto ids = tok.encode(docs[d]);
      if (tok.decode(std::vector<int32_t>(ids.begin() + skip, ids.end())) != docs[d]) {
        fail("BPE " + name + ": decode(encode(document " + std::to_string(d) + ")) differs from the document");
        break;
      }
    }
    // Text that is not UTF-8: never a crash, decode(encode(x)) == x, and each byte that starts no
    // well-formed sequence is a piece of its own (the text either side encoded separately).
    std::mt19937 rng(47);
    const std::vector<std::string> nasty = {"\xff", "\xc3", "\xe2\x82", "\xf0\x9f\x98", "\xc0\xaf", "\xed\xa0\x80",
                                            "\xf4\x90\x80\x80", "\x80\x80", std::string("a\0b", 3)};
    for (int i = 0; i < 3000; ++i) {
      std::string x;
      const int len = static_cast<int>(rng() % 120);
      for (int k = 0; k < len; ++k) {
        const unsigned r = rng() % 10;
        if (r < 3)
          x += static_cast<char>(rng() % 256);
        else if (r < 5)
          x += nasty[rng() % nasty.size()];
        else
          x += docs[rng() % docs.size()].substr(rng() % 40, rng() % 6);
      }
      const auto ids = tok.encode(x);
      if (tok.decode(std::vector<int32_t>(ids.begin() + skip, ids.end())) != x) {
        fail("BPE " + name + ": decode(encode(x)) != x for a text that is not UTF-8");
        break;
      }
    }
    const auto whole = tok.encode("ab\xff" "cd", false);
    auto parts = tok.encode("ab", false);
    const auto ff = tok.encode("\xff", false), cd = tok.encode("cd", false);
    parts.insert(parts.end(), ff.begin(), ff.end());
    parts.insert(parts.end(), cd.begin(), cd.end());
    if (whole != parts || ff.size() != 1) fail("BPE " + name + ": the byte 0xff is not a piece of its own between \"ab\" and \"cd\"");
  }
  std::printf("(BPE speed measured on %zu bytes in %zu documents of 50 lines)\n", nbytes, docs.size());
  return failures ? 1 : 0;
}

int run_spm(const std::string& dir) {
  std::string why;
  if (!SentencePieceTokenizer::available(&why)) {
    std::fprintf(stderr, "FAIL: %s\n", why.c_str());
    return 1;
  }
  const auto lines = lines_of(loom::read_file(dir + "/corpus.txt"));
  // byte strings that are not UTF-8, length-prefixed (check_tokenizers.py's not_utf8_strings)
  std::vector<std::string> not_utf8;
  const std::string packed = loom::read_file(dir + "/not_utf8.bin");
  for (size_t at = 0; at + 4 <= packed.size();) {
    int32_t n = 0;
    std::memcpy(&n, packed.data() + at, 4);
    not_utf8.push_back(packed.substr(at + 4, static_cast<size_t>(n)));
    at += 4 + static_cast<size_t>(n);
  }
  for (const std::string kind : {"bpe", "unigram"}) {
    const auto tok = SentencePieceTokenizer::load(dir + "/py_" + kind + ".model");
    std::vector<std::vector<int32_t>> got, got_bad;
    for (const auto& l : lines) got.push_back(tok.encode(l));
    compare("SentencePiece " + kind, lines, split_ids(read_ids(dir + "/py_" + kind + ".ids")), got);
    for (const auto& b : not_utf8) got_bad.push_back(tok.encode(b));
    compare("SentencePiece " + kind + " on text that is not UTF-8", not_utf8, split_ids(read_ids(dir + "/py_" + kind + ".not_utf8.ids")),
            got_bad);
  }
  loom::data::SentencePieceTrainOptions o;
  o.model_type = "unigram";
  o.vocab_size = 1500;
  o.byte_fallback = true;
  o.max_sentence_length = 8192;
  loom::data::train_sentencepiece(dir + "/corpus.txt", dir + "/loom_spm.model", o);
  const auto mine = SentencePieceTokenizer::load(dir + "/loom_spm.model");
  if (mine.vocab_size() != 1500) fail("the model Loom trained has " + std::to_string(mine.vocab_size()) + " pieces, not 1500");
  std::string flat;
  for (const auto& l : lines) {
    for (int32_t id : mine.encode(l)) flat.append(reinterpret_cast<const char*>(&id), 4);
    const int32_t end = -1;
    flat.append(reinterpret_cast<const char*>(&end), 4);
  }
  loom::write_file_atomic(dir + "/loom_spm.ids", flat);
  std::printf("trained a unigram model of %lld pieces with Loom\n", static_cast<long long>(mine.vocab_size()));
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "bpe") != 0 && std::strcmp(argv[1], "spm") != 0)) {
    std::fprintf(stderr, "usage: loom_text_check bpe|spm DIR\n");
    return 2;
  }
  try {
    return std::strcmp(argv[1], "bpe") == 0 ? run_bpe(argv[2]) : run_spm(argv[2]);
  } catch (const loom::Error& e) {
    std::fprintf(stderr, "FAIL: %s\n", e.what());
    return 1;
  }
}
