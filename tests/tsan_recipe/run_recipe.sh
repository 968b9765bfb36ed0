#!/bin/sh
# SPDX-License-Identifier: MIT
# run_recipe.sh <c++ compiler> <repository root> <work directory>
# Builds tests/tsan_recipe/my_store_threads.cpp with the README's TSan recipe exactly as written:
# the command line is read from README.md (the first line starting "clang++ " with
# -fsanitize=thread), with only its placeholders filled in (<holdfast>: this checkout,
# my_store_threads.cpp: the file here) and clang++ replaced by the build's compiler. The ctests of
# tests/CMakeLists.txt then run ./t in the work directory, as the README's next line does.
set -eu
cxx="$1"
root="$2"
work="$3"
line="$(grep -m1 -E '^clang\+\+ .*-fsanitize=thread' "$root/README.md")" || {
  echo "README.md has no TSan recipe line (clang++ ... -fsanitize=thread)" >&2
  exit 1
}
cmd="$(printf '%s\n' "$line" | sed -e "s|^clang++ |$cxx |" -e "s|<holdfast>|$root|g" \
  -e "s| my_store_threads.cpp | $root/tests/tsan_recipe/my_store_threads.cpp |")"
mkdir -p "$work"
cd "$work"
rm -f t
echo "$cmd"
eval "$cmd"
