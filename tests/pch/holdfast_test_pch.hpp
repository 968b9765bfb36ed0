// SPDX-License-Identifier: MIT
// Precompiled once and force-included into every Catch2 test executable, by CMake and by Meson:
// on a 2-core CI, parsing catch.hpp and rapidcheck in every test file would dominate the build.
// Consequence for test authors: a CATCH_CONFIG_* macro defined in a test file has no effect, since
// catch.hpp is already included; still include <catch2/catch.hpp> (and <rapidcheck/catch.h>)
// yourself so each file also compiles without the precompiled header.
#ifndef HOLDFAST_TESTS_PCH_HOLDFAST_TEST_PCH_HPP
#define HOLDFAST_TESTS_PCH_HOLDFAST_TEST_PCH_HPP

#include <rapidcheck.h>
#include <rapidcheck/catch.h>
#include <catch2/catch.hpp>

#endif  // HOLDFAST_TESTS_PCH_HOLDFAST_TEST_PCH_HPP
