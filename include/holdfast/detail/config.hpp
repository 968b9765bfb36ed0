// SPDX-License-Identifier: MIT
// holdfast/detail/config.hpp - compiler and library feature switches, HOLDFAST_ASSERT.
//
// Not a public header: users do not include it. It decides whether exceptions are on (the core
// never throws, but it must let a user's store or clock exception through and must keep one out
// of destructors), whether C++20 concepts are available, and what a violated precondition does.
#ifndef HOLDFAST_DETAIL_CONFIG_HPP
#define HOLDFAST_DETAIL_CONFIG_HPP

#include <cstdio>
#include <cstdlib>

// MSVC reports __cplusplus as 199711L unless /Zc:__cplusplus is given; _MSVC_LANG is right.
#if (defined(_MSVC_LANG) && _MSVC_LANG < 201703L) || (!defined(_MSVC_LANG) && __cplusplus < 201703L)
#error "holdfast needs C++17 or later (e.g. -std=c++17; clang 14 and g++ 10 default to C++14)"
#endif

/// The library's version; CMakeLists.txt and meson.build carry the same number (the format step
/// of the test command checks all three agree).
#define HOLDFAST_VERSION_MAJOR 0
#define HOLDFAST_VERSION_MINOR 2
#define HOLDFAST_VERSION_PATCH 0

/// HOLDFAST_HAS_EXCEPTIONS is 1 when the translation unit can throw and catch. Detected from the
/// compiler; define it to 0 or 1 before including holdfast to override the detection. It changes
/// the layout of a few internal types, so it is part of the ABI namespace below: objects built in
/// the two modes link without breaking the one-definition rule.
#ifndef HOLDFAST_HAS_EXCEPTIONS
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS) || defined(_CPPUNWIND)
#define HOLDFAST_HAS_EXCEPTIONS 1
#else
#define HOLDFAST_HAS_EXCEPTIONS 0
#endif
#endif

/// HOLDFAST_HAS_CONCEPTS is 1 when the requirements (lease_store, ttl_clock, ...) are real C++20
/// `concept`s that constrain the public templates, 0 for the C++17 traits and static_asserts.
/// Detected; define it to 0 before including holdfast to use the C++17 form under C++20.
#ifndef HOLDFAST_HAS_CONCEPTS
#if defined(__cpp_concepts) && __cpp_concepts >= 201907L && defined(__cpp_lib_concepts)
#define HOLDFAST_HAS_CONCEPTS 1
#elif defined(__cpp_concepts) && __cpp_concepts >= 201907L && __cplusplus >= 202002L
#define HOLDFAST_HAS_CONCEPTS 1
#else
#define HOLDFAST_HAS_CONCEPTS 0
#endif
#endif

/// HOLDFAST_REQUIRES(constraint) puts a requires-clause on a public template under concepts and
/// nothing under C++17, where a static_assert in the template's body names what is missing:
///   template <class Store> HOLDFAST_REQUIRES(lease_store<Store>) class lease;
#if HOLDFAST_HAS_CONCEPTS
#include <concepts>
#define HOLDFAST_REQUIRES(...) requires(__VA_ARGS__)
#else
#define HOLDFAST_REQUIRES(...)
#endif

// The inline namespace every declaration lives in, as {fmt} and nlohmann/json do: its name
// carries the version (minor too, while the major version is 0) and the exception mode, so that
// two builds that disagree on either get different mangled names instead of a silent ODR breach.
// Users never spell it: `holdfast::lease` finds it through the inline namespace.
#if HOLDFAST_HAS_EXCEPTIONS
#define HOLDFAST_DETAIL_ABI_MODE exc
#else
#define HOLDFAST_DETAIL_ABI_MODE noexc
#endif
#define HOLDFAST_DETAIL_ABI_NAME2(major, minor, mode) abi_v##major##_##minor##_##mode
#define HOLDFAST_DETAIL_ABI_NAME(major, minor, mode) HOLDFAST_DETAIL_ABI_NAME2(major, minor, mode)
#define HOLDFAST_ABI_NAMESPACE \
  HOLDFAST_DETAIL_ABI_NAME(HOLDFAST_VERSION_MAJOR, HOLDFAST_VERSION_MINOR, HOLDFAST_DETAIL_ABI_MODE)
/// Open and close the ABI namespace, inside `namespace holdfast { ... }`. Every holdfast header,
/// and a user's specialization of a holdfast template, puts its declarations between the two.
#define HOLDFAST_ABI_NAMESPACE_BEGIN inline namespace HOLDFAST_ABI_NAMESPACE {
#define HOLDFAST_ABI_NAMESPACE_END }

// Brackets the library's own reads of the 0.1 spellings it keeps as [[deprecated]] members, so
// that code built with -Werror sees the warning only for its own uses.
#if defined(__GNUC__) || defined(__clang__)
#define HOLDFAST_DETAIL_ALLOW_DEPRECATED_BEGIN \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wdeprecated-declarations\"")
#define HOLDFAST_DETAIL_ALLOW_DEPRECATED_END _Pragma("GCC diagnostic pop")
#elif defined(_MSC_VER)
#define HOLDFAST_DETAIL_ALLOW_DEPRECATED_BEGIN \
  __pragma(warning(push)) __pragma(warning(disable : 4996))
#define HOLDFAST_DETAIL_ALLOW_DEPRECATED_END __pragma(warning(pop))
#else
#define HOLDFAST_DETAIL_ALLOW_DEPRECATED_BEGIN
#define HOLDFAST_DETAIL_ALLOW_DEPRECATED_END
#endif

// `try { ... } catch (...) { ... }` for the few places that must stop a user's exception (a
// destructor, a background thread). Under -fno-exceptions nothing can be thrown, so the guarded
// block runs plainly and the handler is dropped.
#if HOLDFAST_HAS_EXCEPTIONS
#define HOLDFAST_TRY try
#define HOLDFAST_CATCH_ALL catch (...)
#else
#define HOLDFAST_TRY if (true)
#define HOLDFAST_CATCH_ALL else
#endif

/// HOLDFAST_TRAP() ends the process at once, in any build mode (NDEBUG included), with no handler
/// run: what a fuzz target does on a violated invariant, so that libFuzzer records the input.
/// __builtin_trap() where the compiler has it (GCC, Clang, including Apple's), std::abort()
/// elsewhere (MSVC).
#if defined(__GNUC__) || defined(__clang__)
#define HOLDFAST_TRAP() __builtin_trap()
#else
#define HOLDFAST_TRAP() std::abort()
#endif

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// Reports a violated precondition and aborts. Only programming errors reach it (reading the
/// value of a result that holds an error); bad input never does, it gets an error code instead.
[[noreturn]] inline void assert_fail(const char* expr, const char* msg, const char* file,
                                     int line) noexcept {
  std::fprintf(stderr, "%s:%d: holdfast precondition failed: %s (%s)\n", file, line, msg, expr);
  std::abort();
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

/// HOLDFAST_ASSERT(cond, msg) checks a precondition of the public API. Define it before including
/// any holdfast header to route violations elsewhere (e.g. to your own assertion handler); it must
/// not return normally when `cond` is false. It stays active under NDEBUG: a precondition that is
/// violated in production is better caught than turned into undefined behaviour.
#ifndef HOLDFAST_ASSERT
#define HOLDFAST_ASSERT(cond, msg) \
  ((cond) ? static_cast<void>(0) : ::holdfast::detail::assert_fail(#cond, msg, __FILE__, __LINE__))
#endif

#endif  // HOLDFAST_DETAIL_CONFIG_HPP
