#include "loom/store/store.h"

#include "core/utf8.h"
#include "loom/store/datasets.h"
#include "loom/store/model_registry.h"
#include "loom/store/queries.h"
#include "loom/store/runs.h"
#include "store/schema.h"
#include "store/store_impl.h"

namespace loom::store {

namespace {

bool is_postgresql(const std::string& url) { return url.rfind("postgresql://", 0) == 0 || url.rfind("postgres://", 0) == 0; }

// The database file a URL names: "sqlite:///abs/path", "sqlite://rel/path" or a plain path.
std::string sqlite_path(const std::string& url) {
  const std::string scheme_end = "://";
  const size_t at = url.find(scheme_end);
  if (at == std::string::npos) return url;
  const std::string scheme = url.substr(0, at);
  if (scheme == "sqlite") return url.substr(at + scheme_end.size());
  // (the URL is not quoted: it may be a mistyped postgresql:// URL holding a password)
  throw ValueError("Store::open: unknown URL scheme " + loom::detail::quote_text(scheme, 32) +
                   " (valid: a file path, sqlite:///path, postgresql://...)");
}

}  // namespace

Store Store::open(const std::string& url) {
  auto impl = std::make_shared<detail::StoreImpl>();
  if (is_postgresql(url)) {
    impl->path = detail::redact_password(url);
    impl->conn = detail::open_postgresql(url);
  } else {
    impl->path = sqlite_path(url);
    const std::string& path = impl->path;
    if (path.empty()) throw ValueError("Store::open: the URL '" + url + "' names no database file");
    if (path == ":memory:" || path.rfind("file:", 0) == 0)
      throw ValueError("Store::open: '" + path + "' is not a file path (a store keeps its blobs in a directory beside its file)");
    impl->conn = detail::open_sqlite(path);
  }
  {
    // Read only: another program's database (or a newer store) is refused before anything,
    // even SQLite's journal mode, is written to it.
    Session check = detail::open_session(*impl, Access::Read);
    detail::check_store(detail::connection(check));
  }
  impl->conn->prepare_for_writing();
  impl->schema_version = detail::migrate(*impl);
  impl->blobs = detail::make_blob_store(*impl->conn, impl->path);
  return Store(std::move(impl));
}

Models Store::models() const { return Models(impl_); }
Datasets Store::datasets() const { return Datasets(impl_); }
Queries Store::queries() const { return Queries(impl_); }
Runs Store::runs() const { return Runs(impl_); }

GcReport Store::gc() {
  Session session = detail::open_session(*impl_, Access::Write);  // writers write blob files only under this lock
  const auto removed = impl_->blobs->gc(detail::connection(session));
  session.commit();
  return {removed.files, removed.bytes};
}

int64_t Store::ensure_schema(const SchemaPart& part) const { return detail::ensure_part(*impl_, part); }

int64_t Store::schema_version() const { return impl_->schema_version; }
int64_t Store::library_schema_version() { return detail::library_schema_version(); }
const std::string& Store::path() const { return impl_->path; }
const std::string& Store::blob_dir() const { return impl_->blobs->root(); }

}  // namespace loom::store
