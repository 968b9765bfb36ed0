// SPDX-License-Identifier: MIT
// holdfast/testing/svg.hpp - a history as a picture: a self-contained SVG of who believed what,
// when (Jepsen's timeline pictures are the model), for reading a counterexample faster than its
// text timeline.
//
//   const run_result r = run_schedule(src, o);
//   if (!r.result.ok()) save_counterexample(svg_dir_from_env(), "my-test", r.log, r.result);
//
// One horizontal lane per client, per (store, key) and per resource, on a shared axis of simulated
// true time:
//
//   lane            | drawn
//   ----------------+--------------------------------------------------------------------------
//   client          | its belief (acquired ... the end of its validity, a release, a crash or a
//                   | check that said "not valid") labelled with the token; validity checks
//                   | (filled: valid, hollow: not); failed acquires and renewals; pauses (hatched);
//                   | crashes, restarts, clock jumps; requests and replies in flight (dotted);
//                   | lost replies and store errors after applying (red marks)
//   store "key"     | the store's grants as intervals with token and owner, from the grant to
//                   | the release (solid end) or the expiry by the store's clock (dashed end);
//                   | renewals as ticks; outages (store down) hatched grey
//   resource "key"  | each write with its token: admitted (green) or refused (red outline), joined
//                   | to the writer's lane
//
// The violated invariant, if any, is a red vertical line at the violating event, tagged ("S1
// violated") with the checker's sentence under the title; the violating element is ringed. The
// end of "faults stop" (the liveness check's heal) is a grey dashed line. Every mark carries a
// <title> (a tooltip in browsers) with the event's full description.
//
// The SVG uses no scripts, no external fonts or images and only ASCII text, so it renders the
// same in a browser, in librsvg (Debian's rsvg-convert, used by the tests) and as a CI artifact.
// Times are approximate by a node's clock rate (at most the drift bound): a store's expiry is
// placed at grant time + TTL by that store's clock.
//
// The code: svg_options.hpp (public) holds the options; under testing/detail/, svg_layout.hpp
// places lanes and the time axis, svg_canvas.hpp writes the XML, svg_frame.hpp draws the title,
// axis, lane bands, heal and violation lines and legend, and svg_lanes.hpp the marks on the lanes.
//
// Thread-safety: pure functions of their arguments, except save_counterexample(), which writes
// files.
#ifndef HOLDFAST_TESTING_SVG_HPP
#define HOLDFAST_TESTING_SVG_HPP

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "holdfast/detail/config.hpp"
#include "holdfast/testing/checker.hpp"
#include "holdfast/testing/detail/svg_canvas.hpp"
#include "holdfast/testing/detail/svg_frame.hpp"
#include "holdfast/testing/detail/svg_lanes.hpp"
#include "holdfast/testing/history.hpp"
#include "holdfast/testing/svg_options.hpp"
#include "holdfast/testing/verdict.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// Returns history `h` drawn as a self-contained SVG document (see the table at the top of
/// svg.hpp), with verdict `v` (from check(h)) marked where it happened. Any history is accepted,
/// including an empty one and events naming unknown nodes or keys (drawn as far as they can be);
/// owner ids and keys are escaped, and bytes outside printable ASCII are shown as '?'.
/// Thread-safety: a pure function of its arguments.
[[nodiscard]] inline std::string to_svg(const history& h, const verdict& v,
                                        const svg_options& o = {}) {
  detail::svg::canvas c(h, v, o);
  detail::svg::draw_header(c);
  detail::svg::draw_axis(c);
  detail::svg::draw_lanes_background(c);
  detail::svg::draw_outages(c);
  detail::svg::draw_grants(c);
  detail::svg::draw_client_events(c);
  detail::svg::draw_writes(c);
  detail::svg::draw_marks(c);
  detail::svg::draw_legend(c);
  c.out += "</svg>\n";
  return std::move(c.out);
}

/// As to_svg(h, check(h), o): checks the history first, so a violation is marked.
[[nodiscard]] inline std::string to_svg(const history& h, const svg_options& o = {}) {
  return to_svg(h, check(h), o);
}

/// Returns the directory named by the environment variable HOLDFAST_SVG_DIR, or "" if it is unset
/// or empty. check_store(), fuzz_store() and the simulator tests write counterexample pictures
/// there (save_counterexample()).
[[nodiscard]] inline std::string svg_dir_from_env() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): holdfast never sets the environment.
  const char* d = std::getenv("HOLDFAST_SVG_DIR");
  return d != nullptr ? std::string(d) : std::string();
}

/// Writes `<dir>/<name>.svg` (the picture of `h`, with `v` marked) and `<dir>/<name>.txt` (the
/// verdict's report and the full history as text, the same timeline the checker prints), if
/// `dir` is not empty. The directory must exist (CI creates it; nothing is created here). Names
/// are used as given: pass something filesystem-safe (letters, digits, '-', '_', '.').
/// \returns the path of the SVG written, or "" if `dir` is empty or a file could not be written
///   (no exception: a picture is a diagnostic and must not turn one failure into another).
/// Thread-safety: concurrent calls must use distinct names.
inline std::string save_counterexample(const std::string& dir, const std::string& name,
                                       const history& h, const verdict& v) {
  if (dir.empty()) return {};
  const std::string base = dir + (dir.back() == '/' ? "" : "/") + name;
  const auto write = [](const std::string& path, const std::string& text) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return false;
    const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    return std::fclose(f) == 0 && ok;
  };
  svg_options o;
  o.title = name + ": " +
            (v.ok() ? std::string("all invariants hold")
                    : std::string(to_string(v.violated)) + " violated");
  const bool svg_ok = write(base + ".svg", to_svg(h, v, o));
  (void)write(base + ".txt", v.report() + "\nfull history:\n" + to_string(h));
  return svg_ok ? base + ".svg" : std::string();
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_SVG_HPP