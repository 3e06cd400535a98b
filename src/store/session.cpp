#include "loom/store/session.h"

#include "loom/store/error.h"
#include "loom/store/store.h"
#include "store/store_impl.h"

namespace loom::store {

Session::Session(const Store& store, Access access) : Session(detail::SessionAccess::impl(store), access) {}

Session::Session(detail::StoreImpl& impl, Access access) : lock_(impl.mutex), impl_(impl) {
  impl_.conn->begin(access);  // throws with nothing begun (the lock goes with lock_)
  open_ = true;
}

Session::~Session() {
  if (open_) impl_.conn->rollback();
}

detail::Connection& Session::connection() {
  if (!open_)
    throw StoreError("store: a statement on " + impl_.conn->describe() +
                     " after its session committed (valid: statements between the session's start and commit())");
  return *impl_.conn;
}

std::vector<SqlRow> Session::query(const std::string& sql, const std::vector<SqlValue>& params) {
  return connection().query(sql, params);
}

int64_t Session::execute(const std::string& sql, const std::vector<SqlValue>& params) { return connection().execute(sql, params); }

const std::string& Session::backend() const { return impl_.conn->dialect().name; }

std::string Session::render(const std::string& ddl) const { return impl_.conn->dialect().render(ddl); }

void Session::notify(const std::string& channel) {
  detail::check_channel(channel);
  connection().notify(channel);
}

void Session::commit() {
  detail::Connection& conn = connection();
  open_ = false;  // a failed COMMIT is rolled back by the backend itself
  conn.commit();
  lock_.unlock();
}

}  // namespace loom::store
