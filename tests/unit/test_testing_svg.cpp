// SPDX-License-Identifier: MIT
// Tests of holdfast/testing/svg.hpp (a history as a picture) and progress.hpp (the progress line):
// the SVG of a known history is well-formed XML with the expected elements; hostile owner ids
// stay well-formed; a caught mutant is marked; it renders to PNG with a real SVG renderer
// (librsvg's rsvg-convert, installed by .ci/deps); check_store and the fuzz entry point write it
// when asked.
//
// The README's picture is made here too (hidden: run it by name, it writes a file):
//
//   HOLDFAST_SVG_OUT=examples/pictures build/<dir>/tests/holdfast_unit_tests "[.make_svg]"
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <holdfast/stores/memory.hpp>
#include <holdfast/testing/testing.hpp>
#include <iterator>
#include <string>
#include <vector>

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_testing_svg {

using namespace holdfast::testing;

namespace {

constexpr std::int64_t ms = 1000000;
constexpr std::int64_t s = 1000 * ms;

// the README's timeline as a history: A acquires #33 (ttl 10 s), checks, stalls 14 s; the store
// expires A's lease; B acquires #34 and writes; A wakes and writes with #33. `fenced` decides
// whether A's stale write is refused (the shipped fence) or admitted (no fence: S1 violated).
history design_timeline(bool fenced) {
  history h;
  h.nodes = {"store", "A", "B"};
  h.keys = {"orders"};
  h.primary_store = 0;
  const auto add = [&h](event_kind k, holdfast::testing::node_id n, std::int64_t t) -> event& {
    event e;
    e.kind = k;
    e.node = n;
    e.true_ns = t;
    e.local_ns = t;
    e.store_ns = t;
    h.events.push_back(e);
    return h.events.back();
  };
  event& g1 = add(event_kind::store_acquire, 0, 0);
  g1.peer = 1, g1.owner = "A", g1.token = 33, g1.ttl_ms = 10000;
  event& a1 = add(event_kind::acquired, 1, 1 * ms);
  a1.owner = "A", a1.token = 33, a1.value = 9 * s;  // belief ends at 9 s on A's clock
  event& c1 = add(event_kind::validity, 1, 1 * s);
  c1.owner = "A", c1.token = 33, c1.value = 1;
  event& p = add(event_kind::pause, 1, 1 * s);
  p.value = 14 * s;
  event& g2 = add(event_kind::store_acquire, 0, 11 * s);
  g2.peer = 2, g2.owner = "B", g2.token = 34, g2.ttl_ms = 10000;
  g2.note = fault_note::reply_delayed, g2.value = 200 * ms;
  event& a2 = add(event_kind::acquired, 2, 11 * s + 200 * ms);
  a2.owner = "B", a2.token = 34, a2.value = 20 * s;
  event& w1 = add(event_kind::write, 2, 12 * s);
  w1.owner = "B", w1.token = 34;
  event& w2 = add(event_kind::write, 1, 15 * s);
  w2.owner = "A", w2.token = 33, w2.value = 34;
  w2.outcome = fenced ? static_cast<outcome_code>(holdfast::errc::stale_token) : 0;
  return h;
}

std::size_t count(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = hay.find(needle); at != std::string::npos;
       at = hay.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

// A small well-formedness check: one root element, every tag closed in order, attributes quoted,
// no raw '<' or '&' outside markup except entities, only printable ASCII and whitespace. Returns
// "" or what is wrong.
std::string xml_problem(const std::string& x) {
  std::vector<std::string> open;
  std::size_t i = 0;
  int roots = 0;
  if (x.compare(0, 5, "<?xml") == 0) i = x.find("?>") + 2;
  while (i < x.size()) {
    const unsigned char c = static_cast<unsigned char>(x[i]);
    if (c >= 0x7f || (c < 0x20 && c != '\n' && c != '\t' && c != '\r')) {
      return "byte " + std::to_string(c) + " at " + std::to_string(i);
    }
    if (c == '&') {
      static const char* const ents[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
      bool ok = false;
      for (const char* e : ents) ok = ok || x.compare(i, std::string(e).size(), e) == 0;
      if (!ok) return "bare & at " + std::to_string(i);
      ++i;
      continue;
    }
    if (c != '<') {
      if (c == '>') return "bare > at " + std::to_string(i);
      ++i;
      continue;
    }
    const std::size_t end = x.find('>', i);
    if (end == std::string::npos) return "unterminated tag at " + std::to_string(i);
    std::string tag = x.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.empty()) return "empty tag";
    if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1))
        return "mismatched </" + tag.substr(1) + ">";
      open.pop_back();
      continue;
    }
    const bool self = tag.back() == '/';
    if (self) tag.pop_back();
    const std::string name = tag.substr(0, tag.find_first_of(" \n\t"));
    // Attributes: name="value" pairs, values without '<' (quotes balanced).
    std::size_t quotes = 0;
    for (char q : tag) quotes += q == '"' ? 1 : 0;
    if (quotes % 2 != 0) return "unbalanced quotes in <" + name + ">";
    if (tag.find('<') != std::string::npos) return "'<' inside <" + name + ">";
    if (open.empty()) ++roots;
    if (!self) open.push_back(name);
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  if (roots != 1) return std::to_string(roots) + " root elements";
  return "";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::filesystem::path scratch_dir(const char* name) {
  const std::filesystem::path d =
      std::filesystem::temp_directory_path() /
      ("holdfast-svg-" + std::string(name) + "-" +
       std::to_string(static_cast<unsigned long long>(
           std::chrono::steady_clock::now().time_since_epoch().count())));
  std::filesystem::create_directories(d);
  return d;
}

// The first schedule of mutant `m` (seeded search) that the checker catches.
run_result caught(mutant m) {
  run_options o;
  o.mutation = m;
  for (std::uint64_t seed = 0; seed < 400; ++seed) {
    seeded_source src(seed);
    run_result r = run_schedule(src, o);
    if (!r.result.ok()) return r;
  }
  FAIL("mutant " << to_string(m) << " not caught in 400 seeds");
  return {};
}

}  // namespace

TEST_CASE("svg: a known history draws its lanes, grants, beliefs, writes and the violation",
          "[testing/svg]") {
  const history h = design_timeline(false);
  const verdict v = check(h);
  REQUIRE(v.violated == invariant::s1_fenced_writes);
  const std::string svg = to_svg(h, v);
  INFO(svg);
  REQUIRE(xml_problem(svg).empty());
  REQUIRE(svg.compare(0, 5, "<?xml") == 0);
  REQUIRE(count(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\"") == 1);
  // One lane per client, per (store, key), per resource.
  REQUIRE(count(svg, "data-lane=\"client\"") == 2);
  REQUIRE(count(svg, "data-lane=\"store\"") == 1);
  REQUIRE(count(svg, "data-lane=\"resource\"") == 1);
  REQUIRE(count(svg, ">store &quot;orders&quot;<") == 1);
  // The store's two grants, labelled with token and owner; the two holders' beliefs.
  REQUIRE(count(svg, "<g class=\"grant\"") == 2);
  REQUIRE(count(svg, ">#33 A<") == 1);
  REQUIRE(count(svg, ">#34 B<") == 1);
  REQUIRE(count(svg, "<g class=\"belief\"") == 2);
  REQUIRE(count(svg, "<g class=\"check-valid\"") == 1);
  // Both writes admitted (no fence), the violating one ringed and tagged.
  REQUIRE(count(svg, "<g class=\"write-admitted\"") == 2);
  REQUIRE(count(svg, "<g class=\"write-refused\"") == 0);
  REQUIRE(count(svg, "<g class=\"violation\" data-event=\"7\"") == 1);
  REQUIRE(count(svg, ">S1 violated<") == 1);
  REQUIRE(count(svg, "S1 fenced writes violated: A&apos;s write with #33") == 1);
  // The stall and the delayed reply.
  REQUIRE(count(svg, "<g class=\"pause\"") == 1);
  REQUIRE(count(svg, ">pause 14s<") == 1);
  REQUIRE(count(svg, "<g class=\"reply-delayed\"") == 1);
  // Tooltips describe each event (the violating write's twice: its mark and the violation's).
  REQUIRE(count(svg, "<title>t=15s write by A key=&quot;orders&quot; token=#33 outcome=ok") == 2);
}

TEST_CASE("svg: the same history with the fence refuses the stale write and marks nothing",
          "[testing/svg]") {
  const history h = design_timeline(true);
  const std::string svg = to_svg(h);  // checks the history itself
  REQUIRE(xml_problem(svg).empty());
  REQUIRE(count(svg, "<g class=\"write-admitted\"") == 1);
  REQUIRE(count(svg, "<g class=\"write-refused\"") == 1);
  REQUIRE(count(svg, ">#33 refused<") == 1);
  REQUIRE(count(svg, "class=\"violation\"") == 0);
  REQUIRE(count(svg, "all invariants hold") == 1);
}

TEST_CASE("svg: faults are drawn; hostile names and empty histories stay well-formed",
          "[testing/svg]") {
  history h = design_timeline(false);
  h.nodes[1] = "A<&\"'>\x01\xff";
  h.keys[0] = "k]]>\x7f";
  for (event& e : h.events) {
    if (e.owner == "A") e.owner = "owner <&> \"'\x02\xfe";
  }
  event lost = h.events[0];
  lost.true_ns = 2 * s;
  lost.note = fault_note::reply_lost;
  lost.kind = event_kind::store_renew;
  h.events.insert(h.events.begin() + 3, lost);
  event jump = h.events[2];
  jump.kind = event_kind::clock_jump;
  jump.value = -5 * s;
  h.events.insert(h.events.begin() + 3, jump);
  event crash = h.events.back();
  crash.kind = event_kind::crash;
  crash.true_ns += 1;
  h.events.push_back(crash);
  event restart = crash;
  restart.kind = event_kind::restart;
  restart.true_ns += 2 * s;
  h.events.push_back(restart);
  event down;
  down.kind = event_kind::store_down;
  down.node = 0;
  down.true_ns = 16 * s;
  h.events.push_back(down);
  event up = down;
  up.kind = event_kind::store_up;
  up.true_ns = 18 * s;
  h.events.push_back(up);
  event stray = up;  // a node and a key the history does not name
  stray.kind = event_kind::acquired;
  stray.node = 77;
  stray.key = 200;
  h.events.push_back(stray);
  const std::string svg = to_svg(h);
  INFO(svg);
  REQUIRE(xml_problem(svg).empty());
  for (const char* cls : {"reply-lost", "clock-jump", "crash", "restart", "outage"}) {
    INFO(cls);
    REQUIRE(count(svg, std::string("<g class=\"") + cls + "\"") >= 1);
  }
  REQUIRE(count(svg, ">clock -5s<") == 1);

  const std::string empty = to_svg(history{});
  REQUIRE(xml_problem(empty).empty());
  REQUIRE(count(empty, "0 events") == 1);
}

TEST_CASE("svg: a caught mutant's history is marked with the invariant the checker names",
          "[testing/svg]") {
  const run_result r = caught(mutant::no_fence);
  const std::string svg = to_svg(r.log, r.result);
  REQUIRE(xml_problem(svg).empty());
  REQUIRE(count(svg, ">S1 violated<") == 1);
  REQUIRE(count(svg, "<g class=\"violation\" data-event=\"" + std::to_string(r.result.at) + "\"") ==
          1);
  REQUIRE(count(svg, "<g class=\"grant\"") >= 2);
}

TEST_CASE("svg: renders to PNG with librsvg's rsvg-convert", "[testing/svg]") {
  const char* given = std::getenv("HOLDFAST_RSVG_CONVERT");
  std::string tool = given != nullptr && *given != '\0' ? given : "rsvg-convert";
  if (std::system((tool + " --version >/dev/null 2>&1").c_str()) != 0) {
    // CI installs it (.ci/deps, librsvg2-bin) and must never skip this; a developer may lack it.
    bool required = false;  // as tests/support/real_servers.hpp decides for servers
    for (const char* name : {"CI", "HOLDFAST_REQUIRE_SERVERS"}) {
      const char* v = std::getenv(name);
      const std::string val = v != nullptr ? v : "";
      required = required || (!val.empty() && val != "0" && val != "false");
    }
    if (required) {
      FAIL(tool << " not found: install librsvg2-bin (bash .ci/deps)");
    }
    WARN(tool << " not found (apt-get install librsvg2-bin); not rendering the SVG");
    return;
  }
  const std::filesystem::path dir = scratch_dir("render");
  const run_result r = caught(mutant::no_fence);
  svg_options o;
  o.width = 900;
  {
    std::ofstream f(dir / "caught.svg", std::ios::binary);
    f << to_svg(r.log, r.result, o);
  }
  const std::string cmd =
      tool + " -o '" + (dir / "caught.png").string() + "' '" + (dir / "caught.svg").string() + "'";
  REQUIRE(std::system(cmd.c_str()) == 0);
  const std::string png = read_file((dir / "caught.png").string());
  REQUIRE(png.size() > 1000);
  REQUIRE(png.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
  // IHDR: width and height, big-endian, right after the signature and chunk header.
  const auto be32 = [&png](std::size_t at) {
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < 4; ++k) v = (v << 8) | static_cast<unsigned char>(png[at + k]);
    return v;
  };
  REQUIRE(be32(16) == 900);
  REQUIRE(be32(20) > 200);
  std::filesystem::remove_all(dir);
}

TEST_CASE("svg: check_store and the fuzz entry point write the picture next to the timeline",
          "[testing/svg]") {
  const std::filesystem::path dir = scratch_dir("store");
  conformance_options o;
  o.schedules = 400;
  o.svg_dir = dir.string();
  o.progress = progress_mode::off;
  const conformance_report rep =
      check_store([](sim_clock c) { return mutant_store<sim_clock>(c, mutant::racy_grant); }, o);
  REQUIRE_FALSE(rep.ok());
  std::string failure;
  for (const std::string& f : rep.failures) {
    if (f.rfind("schedule seed=", 0) == 0) failure = f;
  }
  INFO(rep.summary());
  REQUIRE(!failure.empty());
  const std::size_t at = failure.find("picture: ");
  REQUIRE(at != std::string::npos);
  std::string path = failure.substr(at + 9);
  path.erase(path.find('\n'));
  REQUIRE(std::filesystem::exists(path));
  REQUIRE(xml_problem(read_file(path)).empty());
  std::string txt = path;
  txt.replace(txt.size() - 4, 4, ".txt");
  REQUIRE(read_file(txt).find(" violated: ") != std::string::npos);
  REQUIRE(read_file(txt).find("full history:") != std::string::npos);

  // Nothing is written without a directory; an unwritable one is not an error.
  REQUIRE(save_counterexample("", "x", history{}, verdict{}).empty());
  REQUIRE(save_counterexample((dir / "missing" / "deeper").string(), "x", history{}, verdict{})
              .empty());
  std::filesystem::remove_all(dir);
}

TEST_CASE("progress: quiet unless asked; the line names schedules, rate, violations, time left",
          "[testing/progress]") {
  progress_meter off("x", 10, progress_mode::off);
  REQUIRE_FALSE(off.enabled());
  std::FILE* f = std::tmpfile();
  REQUIRE(f != nullptr);
  {
    progress_meter quiet("x", 10, progress_mode::automatic, f);  // a file is not a terminal
    if (std::getenv("HOLDFAST_PROGRESS") == nullptr) REQUIRE_FALSE(quiet.enabled());
    progress_meter on("check_store", 300, progress_mode::on, f);
    REQUIRE(on.enabled());
    on.update(5, 1000, 0);  // within the first 2 s: nothing printed
    REQUIRE(std::ftell(f) == 0);
    REQUIRE(on.line(120, 60000, 1, std::chrono::seconds(4)) ==
            "check_store: 120/300 schedules (40%), 15000 events/s, 1 violation, ~6s left [4s]");
    REQUIRE(on.line(300, 0, 2, std::chrono::seconds(0)) ==
            "check_store: 300/300 schedules (100%), 0 events/s, 2 violations [0s]");
  }
  std::fclose(f);
  progress_meter unknown("sim", 0, progress_mode::off);
  REQUIRE(unknown.line(7, 70, 0, std::chrono::seconds(7)) ==
          "sim: 7 schedules, 10 events/s, 0 violations [7s]");
}

TEST_CASE("make the README's counterexample pictures", "[.make_svg]") {
  // Hidden tags do not hide a case from an exclusion-only filter, so without the variable this
  // case does nothing (as test_testing_corpus.cpp's).
  const char* out = std::getenv("HOLDFAST_SVG_OUT");
  if (out == nullptr) return;
  for (mutant m : {mutant::validity_from_reply, mutant::no_fence}) {
    run_options o;
    o.mutation = m;
    for (std::uint64_t seed = 0;; ++seed) {
      seeded_source prng(seed);
      recording_source rec(prng);
      if (run_schedule(rec, o).result.ok()) continue;
      const shrink_result sh = shrink_failure(
          rec.to_bytes(), [&](byte_source& b) { return run_schedule(b, o); }, 2000);
      svg_options so;
      so.title = std::string("caught: the ") + to_string(m) + " mutant (seed " +
                 std::to_string(seed) + ", shrunk)";
      std::ofstream f(std::filesystem::path(out) / ("caught_" + std::string(to_string(m)) + ".svg"),
                      std::ios::binary);
      f << to_svg(sh.run.log, sh.run.result, so);
      REQUIRE(f.good());
      break;
    }
  }
}

}  // namespace test_testing_svg
