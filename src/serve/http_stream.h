#pragma once
// The pieces of a streamed answer (HttpAnswer::stream) on their way from their producer, a
// worker, to the event loop (http_server.cpp), which takes them in the order written. Apart from
// the loop, as it needs no Beast.
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>

namespace loom::serve::detail {

struct StreamChannel {
  // A producer far ahead of a slow client waits at this many bytes queued rather than growing them.
  static constexpr size_t kMaxQueued = 1 << 20;
  std::mutex mutex;
  std::condition_variable room;  // the queue was taken, or the stream failed
  std::string queued;            // chunks, framed, not yet taken by the loop
  bool ended = false;            // the producer returned
  bool broken = false;           // it threw: the answer is cut (no last chunk), so the client sees it incomplete
  bool failed = false;           // the client is gone: writes answer false

  // Queues one chunk, framed; false once failed. Waits while kMaxQueued bytes are queued.
  bool write(std::string_view piece);
  // The client is gone: wakes a waiting producer, and every write answers false from here.
  void fail();
};

}  // namespace loom::serve::detail
