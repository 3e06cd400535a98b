#pragma once
// Waits for the notifications of a channel of a store, sent by the commits of sessions that
// called Session::notify(channel), in any process (docs/store.md, "Notifications"):
//
//   store::Notifications events(store, "my_channel");   // made before reading, so nothing is missed
//   for (;;) { read what is new ...; events.wait(1000); }
//
// A notification says only that something was committed: the waiter reads the database for
// what. PostgreSQL: LISTEN on a connection of its own, woken by the server on the
// commit of a NOTIFY, across machines. SQLite: an inotify watch on "<db>.<channel>.notify",
// which a committing writer opens and closes, on one machine (a process on another machine
// sharing the file is not woken; see the docs). A notification may be missed when its writer
// dies between its commit and the wake (SQLite) or the listener's connection breaks
// (PostgreSQL: wait() then reconnects and reports a wake): waiters re-read at a bounded interval.
#include <cstdint>
#include <memory>
#include <string>

#include "loom/core/api.h"
#include "loom/store/store.h"

namespace loom::store {

namespace detail {
class Waiter;
}

class LOOM_API Notifications {
 public:
  // Starts listening on `channel` (1 to 63 characters of [a-z0-9_]; ValueError otherwise).
  // StoreError when the watch or the connection cannot be made.
  Notifications(const Store& store, const std::string& channel);
  ~Notifications();
  Notifications(Notifications&&) noexcept;
  Notifications& operator=(Notifications&&) noexcept;

  // Blocks until a notification committed since this object was made and not yet consumed
  // by a wait arrives (true; all pending ones are consumed), or `timeout_ms` passes (false).
  bool wait(int64_t timeout_ms);

 private:
  std::unique_ptr<detail::Waiter> waiter_;
};

}  // namespace loom::store
