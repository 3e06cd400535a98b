// A program that uses the store and the task queue links loom::store (its database, compression
// and hashing libraries come with it).
#include <loom/loom.h>

#include <cstdio>
#include <filesystem>

int main() {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "loom_consumer_store";
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
