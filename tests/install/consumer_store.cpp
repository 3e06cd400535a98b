// A program that uses the store and the task queue links loom::store (its database, compression
// and hashing libraries come with it).
#include <loom/loom.h>

#include <cstdio>
#include <filesystem>

// argv[1]: a folder of its own (run.sh's temporary one), so that two runs at once do not share it.
int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer_store DIR\n");
    return 2;
  }
  const std::filesystem::path dir = std::filesystem::path(argv[1]) / "consumer_store";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  loom::store::Store s = loom::store::Store::open((dir / "consumer.db").string());
  loom::flow::Tasks tasks(s);
  const int64_t id = tasks.submit("consumer.check", R"({"x": 1})");
  const bool ok = tasks.get(id).status == loom::flow::Status::Pending && s.models().names().empty();
  std::filesystem::remove_all(dir);
  std::printf("%s\n", ok ? "ok" : "wrong");
  return ok ? 0 : 1;
}
