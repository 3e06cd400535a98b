#pragma once
// The tables of flow's task queue: a schema part of flow's own, which Tasks registers on the
// store it is given (Store::ensure_schema; docs/workflow.md, "Tasks").
#include "loom/core/api.h"
#include "loom/store/schema_part.h"

namespace loom::flow::detail {

LOOM_INTERNAL const store::SchemaPart& task_schema();
// The stream controllers' tables and the tasks' lineage columns they added (named queries,
// version ranges): a part of its own, "loom.flow.stream", ensured after task_schema()
// (src/flow/stream_schema.cpp).
LOOM_INTERNAL const store::SchemaPart& stream_schema();

}  // namespace loom::flow::detail
