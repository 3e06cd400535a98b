// The browser test's store (tests/ui/check_browser.py): the dashboard tests' store
// (tests/unit/ui/ui_test_store.h) at argv[1]; prints the run and task ids as JSON.
#include <loom/store/store.h>

#include <nlohmann/json.hpp>

#include <iostream>

#include "unit/ui/ui_test_store.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_store STORE.db\n";
    return 2;
  }
  loom::store::Store s = loom::store::Store::open(argv[1]);
  const loom_test::UiStore filled = loom_test::fill_ui_store(s);
  std::cout << nlohmann::json{{"runs", filled.runs}, {"tasks", filled.tasks}}.dump() << std::endl;
  return 0;
}
