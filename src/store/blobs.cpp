#include "store/blobs.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "core/utf8.h"
#include "loom/core/file.h"
#include "loom/store/error.h"
#include "store/crash_point.h"
#include "store/query.h"

namespace loom::store::detail {

namespace {

constexpr int kZstdLevel = 3;

bool is_hex_digest(const std::string& s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw StoreError("store: cannot open the directory '" + dir + "': " + std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) throw StoreError("store: cannot flush the directory '" + dir + "': " + std::strerror(err));
}

// mkdir that is durable: the new entry is flushed into its parent.
void make_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) == 0) {
    const size_t slash = dir.find_last_of('/');
    fsync_dir(slash == std::string::npos ? "." : slash == 0 ? "/" : dir.substr(0, slash));
    return;
  }
  const int err = errno;
  struct stat st {};
  if (err == EEXIST && ::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return;
  throw StoreError("store: cannot create the blob directory '" + dir + "': " +
                   (err == EEXIST ? std::string("a file of that name is in the way") : std::strerror(err)));
}

}  // namespace

std::string sha256_hex(std::string_view bytes) {
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!ctx || EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) != 1 ||
      EVP_DigestUpdate(ctx.get(), bytes.data(), bytes.size()) != 1 || EVP_DigestFinal_ex(ctx.get(), digest, &len) != 1 || len != 32)
    throw StoreError("store: OpenSSL's SHA-256 failed");
  static const char* hex = "0123456789abcdef";
  std::string out(64, '0');
  for (unsigned i = 0; i < 32; ++i) {
    out[2 * i] = hex[digest[i] >> 4];
    out[2 * i + 1] = hex[digest[i] & 15];
  }
  return out;
}

void check_blob_ref(const std::string& sha256, const std::string& what) {
  if (!is_hex_digest(sha256))
    throw BlobError("store: " + what + ": invalid blob reference " + loom::detail::quote_text(sha256) +
                    " in the database (valid: a SHA-256 as 64 lowercase hex digits); the row is damaged and nothing was read");
}

PreparedBlob prepare_blob(std::string_view bytes) {
  PreparedBlob b;
  b.sha256 = sha256_hex(bytes);
  b.size = bytes.size();
  b.compressed.resize(ZSTD_compressBound(bytes.size()));
  const size_t n = ZSTD_compress(b.compressed.data(), b.compressed.size(), bytes.data(), bytes.size(), kZstdLevel);
  if (ZSTD_isError(n)) throw StoreError(std::string("store: zstd compression failed: ") + ZSTD_getErrorName(n));
  b.compressed.resize(n);
  return b;
}

FileBlobStore::FileBlobStore(std::string root) : root_(std::move(root)) { make_dir(root_); }

std::string FileBlobStore::path_of(const std::string& sha256) const {
  if (!is_hex_digest(sha256)) check_blob_ref(sha256, "a file name in the blob directory '" + root_ + "'");
  return root_ + "/" + sha256.substr(0, 2) + "/" + sha256.substr(2);
}

void FileBlobStore::write_file(const PreparedBlob& blob) const {
  make_dir(root_ + "/" + blob.sha256.substr(0, 2));
  try {
    write_file_atomic(path_of(blob.sha256), blob.compressed);  // temp, fsync, rename, fsync dir
  } catch (const IOError& e) {
    throw StoreError("store: cannot write blob " + blob.sha256 + ": " + e.what());
  }
}

void FileBlobStore::add_ref(Connection& conn, const PreparedBlob& blob) const {
  const std::vector<Row> rows = conn.query("SELECT refcount FROM blobs WHERE sha256 = ?", {blob.sha256});
  struct stat st {};
  const bool file_ok = ::stat(path_of(blob.sha256).c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
                       static_cast<uint64_t>(st.st_size) == blob.compressed.size();
  if (rows.empty() || !file_ok) write_file(blob);  // durable before the row commits
  if (rows.empty())
    conn.execute("INSERT INTO blobs (sha256, size, stored_size, refcount, created_ms) VALUES (?, ?, ?, 1, ?)",
                 {blob.sha256, static_cast<int64_t>(blob.size), static_cast<int64_t>(blob.compressed.size()), now_ms()});
  else
    conn.execute("UPDATE blobs SET refcount = refcount + 1, stored_size = ? WHERE sha256 = ?",
                 {static_cast<int64_t>(blob.compressed.size()), blob.sha256});
}

bool BlobStore::release(Connection& conn, const std::string& sha256) const {
  const std::vector<Row> rows = conn.query("SELECT refcount FROM blobs WHERE sha256 = ?", {sha256});
  if (rows.empty()) return true;
  if (rows[0].integer(0) <= 1) {
    conn.execute("DELETE FROM blobs WHERE sha256 = ?", {sha256});
    return true;
  }
  conn.execute("UPDATE blobs SET refcount = refcount - 1 WHERE sha256 = ?", {sha256});
  return false;
}

void FileBlobStore::remove_unreferenced(Connection& conn, const std::vector<std::string>& hashes) const {
  for (const std::string& h : hashes)
    if (is_hex_digest(h) && conn.query("SELECT 1 FROM blobs WHERE sha256 = ?", {h}).empty()) ::unlink(path_of(h).c_str());
}

BlobRef BlobStore::ref(Connection& conn, const std::string& sha256, const std::string& what) const {
  check_blob_ref(sha256, what);
  const std::vector<Row> rows = conn.query("SELECT size, stored_size FROM blobs WHERE sha256 = ?", {sha256});
  if (rows.empty()) throw BlobError("store: " + what + ": blob " + sha256 + " has no row in the blobs table");
  const int64_t size = rows[0].integer(0), stored = rows[0].integer(1);
  if (size < 0 || stored < 0) throw BlobError("store: " + what + ": blob " + sha256 + " has a negative size in its row");
  return {sha256, static_cast<uint64_t>(size), static_cast<uint64_t>(stored)};
}

std::string FileBlobStore::name(const std::string& what, const std::string& sha256) const {
  return what + ": blob " + sha256 + " ('" + path_of(sha256) + "')";
}

std::string FileBlobStore::stored(Connection&, const BlobRef& ref, const std::string& what) const {
  try {
    return read_file(path_of(ref.sha256));
  } catch (const IOError& e) {
    throw BlobError("store: " + name(what, ref.sha256) + " cannot be read: " + e.what());
  }
}

std::string BlobStore::decode(const BlobRef& ref, const std::string& stored, const std::string& what) const {
  const std::string name = this->name(what, ref.sha256);
  if (stored.size() != ref.stored_size)
    throw BlobError("store: " + name + " holds " + std::to_string(stored.size()) + " bytes, its row says " +
                    std::to_string(ref.stored_size) + ": its stored bytes are damaged");
  // Streamed into a buffer that grows with the real output and never past the row's size, so
  // a damaged frame header cannot make us allocate more.
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (!dctx) throw StoreError("store: zstd could not create a decompression context");
  std::string out;
  out.reserve(static_cast<size_t>(std::min<uint64_t>(ref.size, 64u << 20)));
  ZSTD_inBuffer in{stored.data(), stored.size(), 0};
  std::string chunk(ZSTD_DStreamOutSize(), '\0');
  size_t last = 1;
  while (in.pos < in.size || last != 0) {
    ZSTD_outBuffer ob{chunk.data(), chunk.size(), 0};
    last = ZSTD_decompressStream(dctx.get(), &ob, &in);
    if (ZSTD_isError(last)) throw BlobError("store: " + name + " is corrupt: zstd: " + ZSTD_getErrorName(last));
    if (out.size() + ob.pos > ref.size)
      throw BlobError("store: " + name + " decompresses to more than the " + std::to_string(ref.size) + " bytes its row says");
    out.append(chunk.data(), ob.pos);
    if (in.pos == in.size && ob.pos == 0 && last != 0)
      throw BlobError("store: " + name + " is corrupt: its compressed data end early");
  }
  if (out.size() != ref.size)
    throw BlobError("store: " + name + " decompresses to " + std::to_string(out.size()) + " bytes, its row says " +
                    std::to_string(ref.size));
  const std::string actual = sha256_hex(out);
  if (actual != ref.sha256) throw BlobError("store: " + name + " is corrupt: its bytes hash to " + actual);
  return out;
}

BlobStore::Removed FileBlobStore::gc(Connection& conn) const {
  Removed removed;
  DIR* top = ::opendir(root_.c_str());
  if (!top) throw StoreError("store: cannot list the blob directory '" + root_ + "': " + std::strerror(errno));
  std::unique_ptr<DIR, int (*)(DIR*)> top_guard(top, ::closedir);
  while (const dirent* e = ::readdir(top)) {
    const std::string prefix = e->d_name;
    if (prefix.size() != 2 || prefix.find_first_not_of("0123456789abcdef") != std::string::npos) continue;
    const std::string dir = root_ + "/" + prefix;
    std::unique_ptr<DIR, int (*)(DIR*)> sub(::opendir(dir.c_str()), ::closedir);
    if (!sub) continue;
    while (const dirent* f = ::readdir(sub.get())) {
      const std::string file = f->d_name;
      const std::string hash = prefix + file.substr(0, 62);
      bool remove = false;
      if (file.size() == 62 && is_hex_digest(hash))
        remove = conn.query("SELECT 1 FROM blobs WHERE sha256 = ?", {hash}).empty();
      else if (file.size() > 62 && is_hex_digest(hash) && file.compare(62, 5, ".tmp.") == 0)
        remove = true;  // a killed writer's temporary: no live writer holds the lock we hold
      if (!remove) continue;
      const std::string path = dir + "/" + file;
      struct stat st {};
      const uint64_t bytes = ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
      crash_point("gc:removing");
      if (::unlink(path.c_str()) == 0) {
        ++removed.files;
        removed.bytes += bytes;
      }
    }
  }
  return removed;
}

std::string DatabaseBlobStore::name(const std::string& what, const std::string& sha256) const {
  return what + ": blob " + sha256 + " (in the database's blob_data table)";
}

void DatabaseBlobStore::add_ref(Connection& conn, const PreparedBlob& blob) const {
  const std::vector<Row> rows = conn.query(
      "SELECT b.refcount, octet_length(d.data) FROM blobs b LEFT JOIN blob_data d ON d.sha256 = b.sha256 WHERE b.sha256 = ?", {blob.sha256});
  const int64_t stored = static_cast<int64_t>(blob.compressed.size());
  if (rows.empty()) {
    conn.execute("INSERT INTO blobs (sha256, size, stored_size, refcount, created_ms) VALUES (?, ?, ?, 1, ?)",
                 {blob.sha256, static_cast<int64_t>(blob.size), stored, now_ms()});
  } else {
    conn.execute("UPDATE blobs SET refcount = refcount + 1, stored_size = ? WHERE sha256 = ?", {stored, blob.sha256});
    if (!rows[0].is_null(1) && rows[0].integer(1) == stored) return;
  }
  // New, or a repair of missing or damaged bytes: in this transaction, with the row.
  conn.execute("INSERT INTO blob_data (sha256, data) VALUES (?, ?) ON CONFLICT (sha256) DO UPDATE SET data = excluded.data",
               {blob.sha256, Bytes{blob.compressed}});
}

std::string DatabaseBlobStore::stored(Connection& conn, const BlobRef& ref, const std::string& what) const {
  const std::vector<Row> rows = conn.query("SELECT data FROM blob_data WHERE sha256 = ?", {ref.sha256});
  if (rows.empty() || rows[0].is_null(0))
    throw BlobError("store: " + name(what, ref.sha256) + " cannot be read: it has no bytes in blob_data");
  return rows[0].blob(0);
}

std::unique_ptr<BlobStore> make_blob_store(const Connection& conn, const std::string& db_path) {
  if (conn.dialect().name == "sqlite") return std::make_unique<FileBlobStore>(db_path + ".blobs");
  return std::make_unique<DatabaseBlobStore>();
}

}  // namespace loom::store::detail
