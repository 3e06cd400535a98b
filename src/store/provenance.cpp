#include "loom/store/provenance.h"

#include <string>

#include "loom/core/error.h"
#include "loom/store/error.h"
#include "store/store_impl.h"

namespace loom::store::detail {

void check_provenance_ids(const char* op, const Provenance& p) {
  if (p.task_id < 0 || p.run_id < 0)
    throw ValueError(std::string(op) + ": produced_by has a negative id (task " + std::to_string(p.task_id) + ", run " +
                     std::to_string(p.run_id) + "; valid: 0 for none, or the id of a task and of a run)");
}

void check_provenance(Connection& conn, const char* op, const Provenance& p) {
  check_provenance_ids(op, p);
  if (p.run_id > 0 && conn.query("SELECT id FROM runs WHERE id = ?", {p.run_id}).empty())
    throw NotFoundError(std::string(op) + ": produced_by.run_id " + std::to_string(p.run_id) + " is not a run of this store");
}

}  // namespace loom::store::detail
