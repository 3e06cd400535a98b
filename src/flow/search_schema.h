#pragma once
// The tables of intermediate reports and searches: a schema part of their own, "loom.flow.search"
// (so that they migrate apart from the task queue's), which Reports and search() ensure.
#include "loom/core/api.h"
#include "loom/store/schema_part.h"

namespace loom::flow::detail {

LOOM_INTERNAL const store::SchemaPart& search_schema();

}  // namespace loom::flow::detail
