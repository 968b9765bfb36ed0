#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_disjoint_symbols.sh <nm> <a.o> <b.o>
# Fails if a symbol in namespace holdfast (demangled) is defined by both object files, or if
# either defines none (then the test would exercise nothing).
set -euo pipefail
nm_tool="$1"
a="$2"
b="$3"
holdfast_symbols() {
  # "<address> <type> <demangled name>": holdfast's own code and data, which an ODR clash merges.
  "$nm_tool" --defined-only --demangle "$1" | sed -n 's/^[0-9a-fA-F]* [TtWwVvuRrDdBb] \(.*holdfast::.*\)$/\1/p' | sort -u
}
sa="$(holdfast_symbols "$a")"
sb="$(holdfast_symbols "$b")"
[[ -n "$sa" && -n "$sb" ]] || { echo "an object defines no holdfast symbol: the test exercises nothing" >&2; exit 1; }
common="$(comm -12 <(echo "$sa") <(echo "$sb"))"
if [[ -n "$common" ]]; then
  echo "$(echo "$common" | wc -l) holdfast symbols are defined by both the exceptions and the no-exceptions object, e.g.:" >&2
  echo "$common" | head -5 >&2
  exit 1
fi
echo "holdfast symbols: $(echo "$sa" | wc -l) and $(echo "$sb" | wc -l), none shared"
