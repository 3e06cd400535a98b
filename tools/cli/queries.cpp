// `loom queries`: create, list, show and delete named queries over datasets (docs/cli.md).
#include <cstdlib>
#include <iostream>

#include "cli.h"
#include "loom/store/queries.h"

namespace loom::cli {

namespace {

using store::NamedQuery;

std::string versions_text(const NamedQuery& q) {
  if (q.first_version == 0) return "latest";
  if (q.last_version == 0) return q.first_version == 1 ? "all" : std::to_string(q.first_version) + "..";
  if (q.first_version == q.last_version) return std::to_string(q.first_version);
  return std::to_string(q.first_version) + ".." + std::to_string(q.last_version);
}

std::string where_text(const store::Predicate& p) {
  return p.key + " " + p.op + " " + (p.value.is_text() ? nlohmann::json(p.value.text()).dump() : format_number(p.value.number()));
}

nlohmann::ordered_json to_json(const NamedQuery& q) { return store::record_json<nlohmann::ordered_json>(q); }

int list(const Args& a) {
  const std::vector<NamedQuery> found = a.open_store().queries().list();
  if (a.json()) {
    nlohmann::ordered_json j = nlohmann::ordered_json::array();
    for (const auto& q : found) j.push_back(to_json(q));
    print_json(j);
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& q : found) {
    std::vector<std::string> where;
    for (const auto& p : q.query.where) where.push_back(where_text(p));
    rows.push_back({q.name, q.dataset, versions_text(q), join(q.query.tags), join(where, " and "), format_time(q.created_ms)});
  }
  print_table({"NAME", "DATASET", "VERSIONS", "TAGS", "WHERE", "CREATED"}, rows);
  return kExitOk;
}

int show(const Args& a) {
  const store::Queries queries = a.open_store().queries();
  const NamedQuery q = queries.get(a.positional()[0]);
  const std::shared_ptr<store::QueryView> view = queries.open(q.name);
  if (a.json()) {
    nlohmann::ordered_json j = to_json(q);
    j["versions_now"] = view->versions();
    j["samples_now"] = view->size();
    print_json(j);
    return kExitOk;
  }
  std::vector<std::string> where, now;
  for (const auto& p : q.query.where) where.push_back(where_text(p));
  for (int64_t v : view->versions()) now.push_back(std::to_string(v));
  print_fields({{"name", q.name},
                {"dataset", q.dataset},
                {"versions", versions_text(q)},
                {"tags", q.query.tags.empty() ? "-" : join(q.query.tags)},
                {"where", where.empty() ? "-" : join(where, " and ")},
                {"order by", q.query.order_by.empty() ? "sample index" : q.query.order_by + (q.query.descending ? " (descending)" : "")},
                {"offset", std::to_string(q.query.offset)},
                {"limit", q.query.limit < 0 ? "none" : std::to_string(q.query.limit)},
                {"fields", q.query.fields.empty() ? "all" : join(q.query.fields)},
                {"created", format_time(q.created_ms)},
                {"versions now", now.empty() ? "none" : join(now)},
                {"samples now", std::to_string(view->size())}});
  return kExitOk;
}

// "KEY OP VALUE": the first operator splits it; a value that reads as a number is one.
store::Predicate parse_where(const Args& a, const std::string& text) {
  static const char* const ops[] = {"<=", ">=", "==", "!=", "<", ">"};
  for (size_t i = 0; i < text.size(); ++i)
    for (const char* op : ops)
      if (text.compare(i, std::strlen(op), op) == 0) {
        const auto trim = [](std::string s) {
          s.erase(0, s.find_first_not_of(' '));
          s.erase(s.find_last_not_of(' ') + 1);
          return s;
        };
        const std::string key = trim(text.substr(0, i)), value = trim(text.substr(i + std::strlen(op)));
        if (key.empty() || value.empty()) a.fail("--where '" + text + "' needs a key and a value (valid: e.g. 'label == 3')");
        char* end = nullptr;
        const double number = std::strtod(value.c_str(), &end);
        if (end && *end == '\0') return {key, op, number};
        std::string s = value;
        if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front()) s = s.substr(1, s.size() - 2);
        return {key, op, s};
      }
  a.fail("--where '" + text + "' has no operator (valid: KEY OP VALUE, OP one of < <= == != >= >)");
}

int create(const Args& a) {
  NamedQuery q;
  q.name = a.positional()[0];
  q.dataset = *a.value("--dataset");
  const std::string v = a.value("--versions").value_or("all");
  if (v == "all") q.first_version = 1, q.last_version = 0;
  else if (v == "latest") q.first_version = 0, q.last_version = 0;
  else if (const size_t dots = v.find(".."); dots != std::string::npos) {
    q.first_version = parse_integer(a, v.substr(0, dots), "--versions");
    q.last_version = dots + 2 == v.size() ? 0 : parse_integer(a, v.substr(dots + 2), "--versions");
  } else {
    q.first_version = q.last_version = parse_integer(a, v, "--versions");
  }
  q.query.tags = a.values("--tag");
  for (const std::string& w : a.values("--where")) q.query.where.push_back(parse_where(a, w));
  q.query.order_by = a.value("--order-by").value_or("");
  q.query.descending = a.flag("--descending");
  q.query.offset = a.integer("--offset", 0, 0);
  q.query.limit = a.integer("--limit", -1, -1);
  q.query.fields = a.values("--field");
  const NamedQuery made = a.open_store().queries().create(q);
  if (a.json()) print_json(to_json(made));
  else std::cout << made.name << '\n';
  return kExitOk;
}

int remove(const Args& a) {
  a.open_store().queries().remove(a.positional()[0]);
  if (a.json()) print_json({{"deleted", a.positional()[0]}});
  return kExitOk;
}

}  // namespace

const Group& queries_group() {
  static const Group g{
      "queries", "create, list, show and delete named queries over datasets",
      {{"list", "", 0, 0, {}, "the named queries, by name", list},
       {"show", "NAME", 1, 1, {}, "one query with the versions it covers now and how many samples it selects", show},
       {"create", "NAME", 1, 1,
        {{.name = "--dataset", .value = "D", .help = "the dataset it selects from", .required = true},
         {"--versions", "V", false, "", "all (the default: every version, new ones joining), latest, a version N, a range A..B or A.. (A to the latest)"},
         {"--tag", "T", true, "", "only samples of versions carrying tag T"},
         {"--where", "'KEY OP VALUE'", true, "", "only samples whose KEY satisfies the condition (OP one of < <= == != >= >; strings: == and !=)"},
         {"--order-by", "KEY", false, "", "the samples' order (default: their index)"},
         {"--descending", "", false, "", "--order-by, highest first"},
         {"--offset", "N", false, "", "skip the first N samples"},
         {"--limit", "N", false, "", "at most N samples"},
         {"--field", "F", true, "", "only field F (default: all)"}},
        "stores a named query (docs/store.md, Named queries); an unknown dataset exits 3, a name taken or a bad "
        "predicate 1",
        create},
       {"delete", "NAME", 1, 1, {}, "deletes a named query (the data stays)", remove}}};
  return g;
}

}  // namespace loom::cli
