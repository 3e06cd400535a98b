// A streamed answer's queue of chunks (http_stream.h).
#include "serve/http_stream.h"

#include <cstdio>

namespace loom::serve::detail {

bool StreamChannel::write(std::string_view piece) {
  std::unique_lock lock(mutex);
  room.wait(lock, [&] { return failed || queued.size() < kMaxQueued; });
  if (failed) return false;
  if (piece.empty()) return true;  // an empty chunk would end the answer
  char size[24];
  std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
  queued += size;
  queued += piece;
  queued += "\r\n";
  return true;
}
void StreamChannel::fail() {
  std::lock_guard lock(mutex);
  failed = true;
  room.notify_all();
}

}  // namespace loom::serve::detail
