// The `loom` command line (tools/cli, docs/cli.md) without a store: usage, refusals and their
// exit codes, the help behind docs/cli.md's table, text made safe for a terminal, passwords kept
// out of messages.
#include <loom/core/text.h>

#include "unit/tools/cli_runner.h"

using namespace loom;
using namespace loom_test;
using nlohmann::json;

// The one escaping of text for a terminal (loom::detail::escape_text, behind the command line's
// terminal_text and the store's quoted values).
TEST(Cli, TerminalTextEscapesControlsAndStrayBytes) {
  using loom::detail::escape_text;
  EXPECT_EQ(escape_text("a\x1b]0;t\x07" "b"), "a\\x1b]0;t\\x07b");
  EXPECT_EQ(escape_text(std::string("\0\x1f\x7f", 3)), "\\x00\\x1f\\x7f");
  EXPECT_EQ(escape_text("\xc2\x9b" "1m \xc2\x80 \xc2\xa0"), "\\u{9b}1m \\u{80} \xc2\xa0");  // C1 escaped, NBSP kept
  EXPECT_EQ(escape_text("\x9b \xc3 \xed\xa0\x80 \xff"), "\\x9b \\xc3 \\xed\\xa0\\x80 \\xff");  // not UTF-8
  EXPECT_EQ(escape_text("mod\xc3\xa8le \xe2\x82\xac \xf0\x9f\x99\x82 C:\\x"), "mod\xc3\xa8le \xe2\x82\xac \xf0\x9f\x99\x82 C:\\x");
  EXPECT_EQ(escape_text("a\nb\tc\rd"), "a\\nb\\tc\\rd");
  EXPECT_EQ(escape_text("a\nb\tc\rd", true), "a\nb\tc\\rd");
  EXPECT_EQ(escape_text(std::string(300, 'a'), false, 10), "aaaaaaaaaa... (300 bytes)");
  EXPECT_EQ(escape_text("\xc3\xa9\xc3\xa9\xc3\xa9", false, 3), "\xc3\xa9... (6 bytes)");  // cut at a character
  const std::string wild = "x\x1b[2J\xc2\x9b\x9b\x7f\n\xe2\x82";
  EXPECT_EQ(escape_text(escape_text(wild)), escape_text(wild));
  EXPECT_TRUE(terminal_safe(escape_text(wild)));
  EXPECT_EQ(loom::detail::quote_text("it's\x1b"), "'it's\\x1b'");
}

TEST(Cli, UsageAndStoreErrors) {
  loom_test::TempDir tmp;
  Cli loom(tmp.dir.string());
  CliResult r = loom({"models", "list"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "no store: pass --store URL")) << r.err;
  EXPECT_TRUE(contains(r.err, "LOOM_STORE")) << r.err;

  // a missing SQLite file is not created
  const std::string missing = tmp / "missing.db";
  r = loom({"tasks", "list", "--store", missing});
  EXPECT_EQ(r.code, 3);
  EXPECT_TRUE(contains(r.err, "no store at '" + missing + "'")) << r.err;
  EXPECT_FALSE(std::filesystem::exists(missing));

  r = loom({});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "missing command (valid: models, datasets, runs, tasks, plans, searches, queries, controllers, agent, serve, ui, generate)")) << r.err;
  r = loom({"ui", "--port", "70000", "--store", missing});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "--port must be 0 to 65535")) << r.err;
  r = loom({"ui", "--store", missing});
  EXPECT_EQ(r.code, 3);  // the dashboard never creates a store either
  EXPECT_FALSE(std::filesystem::exists(missing));
  r = loom({"ui", "--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_TRUE(contains(r.out, "--allow-writes")) << r.out;
  r = loom({"modles", "list"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "unknown command 'modles' (valid: models, datasets, runs, tasks, plans, searches, queries, controllers, agent, serve, ui, generate)")) << r.err;
  r = loom({"tasks", "lst"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "unknown command 'lst' (valid: list, show, submit, cancel, replay, events)")) << r.err;
  EXPECT_TRUE(contains(r.err, "loom tasks --help")) << r.err;
  r = loom({"models", "list", "--bogus"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "unknown option '--bogus' (valid: --name, --tag, --where, --store, --json, --help)")) << r.err;
  r = loom({"tasks", "show"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "tasks show: missing argument (loom tasks show ID)")) << r.err;
  r = loom({"tasks", "show", "1", "2"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "unexpected argument '2'")) << r.err;
  r = loom({"tasks", "--bogus", "list"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "tasks: unknown option '--bogus' (valid before a command: --store, --json, --help)")) << r.err;
  r = loom({"tasks", "list", "--store"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "--store needs a value")) << r.err;

  // help: usage on stdout, exit 0, without a store
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--help"}, {"models"}, {"tasks", "--help"},
                                               {"runs", "top", "--help"}, {"agent", "--help"}, {"datasets", "-h"}}) {
    r = loom(args);
    EXPECT_EQ(r.code, 0) << args[0];
    EXPECT_EQ(r.out.rfind("usage: loom", 0), 0u) << r.out;
    EXPECT_TRUE(r.err.empty()) << r.err;
  }
  EXPECT_TRUE(contains(loom({"agent", "--help"}).out, "--stop-when-idle"));
  // a verb's --help is its own: its usage and what each of its options is
  r = loom({"runs", "top", "--help"});
  EXPECT_EQ(r.out.rfind("usage: loom runs top --metric M [--at final|max|min]", 0), 0u) << r.out;
  EXPECT_TRUE(contains(r.out, "--metric M")) << r.out;
  EXPECT_FALSE(contains(r.out, "compare")) << r.out;
  r = loom({"models", "alias", "set", "--help"});
  EXPECT_EQ(r.out.rfind("usage: loom models alias set NAME ALIAS VERSION [--replace]", 0), 0u) << r.out;
  r = loom({"models", "alias", "rename", "a", "b"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "models alias: unknown command 'rename' (valid: set, delete)")) << r.err;
  r = loom({"controllers", "create", "c", "--dataset", "d"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "controllers create: give one of --kind and --plan")) << r.err;
}

// docs/cli.md's table of commands is what `loom help --markdown` makes of the command line's
// tables of verbs, and every group that `loom --help` lists has its rows there, each row's usage in
// the group's --help: a verb added, renamed or given an option fails here until
// scripts/cli_reference.sh has rewritten the table.
TEST(Cli, DocsReferenceIsTheHelp) {
  loom_test::TempDir tmp;
  Cli loom(tmp.dir.string());
  const CliResult md = loom({"help", "--markdown"});
  ASSERT_EQ(md.code, 0) << md.err;
  std::ifstream f(std::string(LOOM_SOURCE_DIR) + "/docs/cli.md");
  const std::string doc(std::istreambuf_iterator<char>(f), {});
  const size_t begin = doc.find("<!-- reference: begin"), end = doc.find("<!-- reference: end");
  ASSERT_TRUE(begin != std::string::npos && end != std::string::npos && begin < end) << "docs/cli.md has no reference markers";
  const size_t first = doc.find('\n', begin) + 1;
  EXPECT_EQ(doc.substr(first, end - first), md.out)
      << "docs/cli.md's table of commands is not the command line's: run scripts/cli_reference.sh BUILD_DIR";

  // whitespace made single spaces: help wraps long usage lines
  const auto flat = [](const std::string& text) {
    std::string out;
    for (char c : text)
      if (!std::isspace(static_cast<unsigned char>(c))) out += c;
      else if (!out.empty() && out.back() != ' ') out += ' ';
    return out;
  };
  const CliResult main_help = loom({"--help"});
  ASSERT_EQ(main_help.code, 0);
  std::vector<std::string> groups;
  for (const std::string& l : lines(main_help.out.substr(main_help.out.find("commands:\n") + 10)))
    if (l.rfind("  ", 0) == 0 && l.size() > 2 && l[2] != ' ') groups.push_back(l.substr(2, l.find(' ', 2) - 2));
    else if (l.empty()) break;
  EXPECT_EQ(groups.size(), 12u) << main_help.out;
  for (const std::string& g : groups) {
    SCOPED_TRACE(g);
    const CliResult help = loom({g, "--help"});
    ASSERT_EQ(help.code, 0) << help.err;
    int rows = 0;
    for (const std::string& row : lines(md.out)) {
      const std::string prefix = "| `loom " + g + " ";
      if (row.rfind(prefix, 0) != 0) continue;
      ++rows;
      std::string usage = row.substr(prefix.size(), row.find("` |") - prefix.size());
      for (size_t at; (at = usage.find("\\|")) != std::string::npos;) usage.erase(at, 1);  // the table's \| is |
      EXPECT_TRUE(contains(flat(help.out), usage)) << "'" << usage << "' is not in loom " << g << " --help:\n" << help.out;
    }
    EXPECT_GT(rows, 0) << "no row of loom " << g << " in docs/cli.md";
  }
}

// A password in --store never reaches the output, whatever the URL holds (store_db_test's
// StoreUrl.PasswordsNeverInMessages has the library's side).
TEST(Cli, PasswordsNeverInMessages) {
  loom_test::TempDir tmp;
  Cli loom(tmp.dir.string());
  const std::string q = "/db1?host=" + (tmp / "no-server");
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"postgresql://alice:50%off-Secret@" + q, {"50%off", "off-Secret", "Secret"}},
      {"postgresql://alice:ab%00cdSecret@" + q, {"%00cd", "cdSecret", "Secret"}},
      {"postgresql://alice:pw%zzSecret@" + q, {"%zz", "zzSecret", "Secret"}},
      {"postgresql://alice:p@ssSecret@" + q, {"ssSecret", "Secret"}},
      {"postgresql://alice:pa:ssSecret@" + q, {"pa:ss", "ssSecret", "Secret"}},
      {"postgresql://alice:" + std::string(3000, 'S') + "ecret@" + q, {"SSSSSSecret"}},
      {"postgresql://alice:connection@" + q, {"connection"}},
      {"postgresql://alice:Secret42@[::1/db1", {"Secret42"}},
      {"postgresql://alice@" + q + "&password=50%offSecret", {"offSecret", "Secret"}},
      {"postgresq://alice:Secret9@host/db1", {"Secret9"}}};
  for (const auto& [url, secret] : cases) {
    SCOPED_TRACE(url.substr(0, 120));
    for (const std::vector<std::string>& args : {std::vector<std::string>{"models", "list", "--store", url},
                                                 {"tasks", "list", "--json", "--store", url}}) {
      const CliResult r = loom(args);
      EXPECT_EQ(r.code, 1) << r.err;
      EXPECT_EQ(r.err.rfind("loom: error: ", 0), 0u) << r.err;
      EXPECT_TRUE(r.out.empty()) << r.out;
      EXPECT_TRUE(terminal_safe(r.err));
      for (const std::string& part : secret) EXPECT_FALSE(contains(r.err, part)) << "'" << part << "' in: " << r.err;
    }
  }
}
