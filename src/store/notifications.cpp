#include "loom/store/notifications.h"

#include <cctype>

#include "loom/core/error.h"

#include "loom/store/session.h"
#include "store/db.h"
#include "store/store_impl.h"

namespace loom::store {

void detail::check_channel(const std::string& channel) {
  bool ok = !channel.empty() && channel.size() <= 63;
  for (char c : channel) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
  if (!ok) throw ValueError("store: invalid notification channel '" + channel + "' (valid: 1 to 63 characters of [a-z0-9_])");
}

Notifications::Notifications(const Store& store, const std::string& channel) {
  detail::check_channel(channel);
  detail::StoreImpl& impl = detail::SessionAccess::impl(store);
  std::lock_guard<std::mutex> lock(impl.mutex);  // the connection makes the waiter, which owns its own
  waiter_ = impl.conn->listen(channel);
}

Notifications::~Notifications() = default;
Notifications::Notifications(Notifications&&) noexcept = default;
Notifications& Notifications::operator=(Notifications&&) noexcept = default;

bool Notifications::wait(int64_t timeout_ms) { return waiter_->wait(timeout_ms); }

}  // namespace loom::store
