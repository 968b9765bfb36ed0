// SPDX-License-Identifier: MIT
// holdfast/result.hpp - result<T>: a value, or the std::error_code saying why there is none.
//
// Every holdfast operation that can fail returns a result, in the style of simdjson and
// std::expected: contention, stale tokens and store failures are ordinary outcomes that the caller
// inspects, not exceptions. holdfast code never throws, so the core builds with -fno-exceptions.
//
//   holdfast::result<holdfast::grant> r = store.try_acquire("orders", owner, 10s);
//   if (!r) { if (holdfast::is_contention(r.error())) retry_later(); else report(r.error()); }
//   else use(r->token);
#ifndef HOLDFAST_RESULT_HPP
#define HOLDFAST_RESULT_HPP

#include <system_error>
#include <type_traits>
#include <utility>
#include <variant>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// Holds either a T or a non-zero std::error_code. [[nodiscard]]: ignoring a result ignores an
/// outcome (a lost lease, a rejected write), which is always a bug.
///
/// Reading value() of a result that holds an error violates a precondition and goes through
/// HOLDFAST_ASSERT; check has_value() (or `if (r)`) first. Constructing a result from a zero
/// (success) error code is likewise a precondition violation: an error must say what went wrong.
///
/// Thread-safety: like any value type; distinct objects may be used from distinct threads.
template <class T>
class [[nodiscard]] result {
  static_assert(!std::is_reference_v<T>, "holdfast::result<T&> is not supported; use a pointer");
  static_assert(!std::is_same_v<std::decay_t<T>, std::error_code>,
                "holdfast::result<std::error_code> is ambiguous");

 public:
  using value_type = T;

  /// Holds a value.
  result(const T& value) : v_(std::in_place_index<0>, value) {}  // NOLINT: implicit by design
  /// Holds a value.
  result(T&& value) : v_(std::in_place_index<0>, std::move(value)) {}  // NOLINT
  /// Holds a value constructed in place from `args` (T's constructor arguments), so that a T that
  /// is costly to move (holdfast::lease) is built where the result keeps it, not moved there.
  template <class... Args>
  explicit result(std::in_place_t, Args&&... args)
      : v_(std::in_place_index<0>, std::forward<Args>(args)...) {}
  /// Holds an error; `ec` must be non-zero.
  result(std::error_code ec) noexcept : v_(std::in_place_index<1>, ec) {  // NOLINT
    HOLDFAST_ASSERT(ec, "a holdfast::result error must be a non-zero error code");
  }
  /// Holds the holdfast error `e`.
  result(errc e) noexcept : result(make_error_code(e)) {}  // NOLINT

  /// Returns true iff a value is held.
  [[nodiscard]] bool has_value() const noexcept { return v_.index() == 0; }
  /// Returns true iff a value is held.
  explicit operator bool() const noexcept { return has_value(); }

  /// Returns the error, or a zero (success) error code when a value is held.
  [[nodiscard]] std::error_code error() const noexcept {
    const std::error_code* ec = std::get_if<1>(&v_);
    return ec ? *ec : std::error_code{};
  }

  /// Returns the held value. Precondition: has_value().
  [[nodiscard]] T& value() & {
    HOLDFAST_ASSERT(has_value(), "value() of a holdfast::result that holds an error");
    return *std::get_if<0>(&v_);
  }
  /// Returns the held value. Precondition: has_value().
  [[nodiscard]] const T& value() const& {
    HOLDFAST_ASSERT(has_value(), "value() of a holdfast::result that holds an error");
    return *std::get_if<0>(&v_);
  }
  /// Moves the held value out. Precondition: has_value().
  [[nodiscard]] T&& value() && {
    HOLDFAST_ASSERT(has_value(), "value() of a holdfast::result that holds an error");
    return std::move(*std::get_if<0>(&v_));
  }

  /// Returns the held value, or `fallback` converted to T when an error is held.
  template <class U>
  [[nodiscard]] T value_or(U&& fallback) const& {
    return has_value() ? *std::get_if<0>(&v_) : static_cast<T>(std::forward<U>(fallback));
  }
  /// Moves the held value out, or returns `fallback` converted to T when an error is held.
  template <class U>
  [[nodiscard]] T value_or(U&& fallback) && {
    return has_value() ? std::move(*std::get_if<0>(&v_))
                       : static_cast<T>(std::forward<U>(fallback));
  }

  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, std::error_code> v_;
};

/// An outcome with no value: success, or a non-zero std::error_code.
template <>
class [[nodiscard]] result<void> {
 public:
  using value_type = void;

  /// Success.
  result() noexcept = default;
  /// Holds an error; `ec` must be non-zero.
  result(std::error_code ec) noexcept  // NOLINT: implicit by design
      : code_(ec.value()), category_(ec ? &ec.category() : nullptr) {
    HOLDFAST_ASSERT(ec, "a holdfast::result error must be a non-zero error code");
  }
  /// Holds the holdfast error `e`.
  result(errc e) noexcept  // NOLINT
      : code_(static_cast<int>(e)), category_(e != errc{} ? &error_category() : nullptr) {}

  /// Returns true iff the operation succeeded.
  [[nodiscard]] bool has_value() const noexcept { return category_ == nullptr; }
  /// Returns true iff the operation succeeded.
  explicit operator bool() const noexcept { return has_value(); }
  /// Returns the error, or a zero error code on success.
  [[nodiscard]] std::error_code error() const noexcept {
    return category_ != nullptr ? std::error_code(code_, *category_) : std::error_code{};
  }
  /// Checks success. Precondition: has_value().
  void value() const {
    HOLDFAST_ASSERT(has_value(), "value() of a holdfast::result that holds an error");
  }

 private:
  // The error in its two parts, no category meaning success. A success is then two constant
  // stores: a default std::error_code{} would call std::system_category(), out of line in
  // libstdc++, on every successful admit(), release() or fenced write (2.5 ns against 1 ns for the
  // whole fence_gate::admit of a repeated token, tests/benchmarks).
  int code_ = 0;
  const std::error_category* category_ = nullptr;
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_RESULT_HPP
