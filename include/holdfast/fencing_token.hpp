// SPDX-License-Identifier: MIT
// holdfast/fencing_token.hpp - fencing_token: the number a grant carries so that downstream
// resources can refuse a holder that lost its lease without knowing it.
//
// A store issues a strictly greater token with every grant of a key, in the same atomic step as
// the grant (Kleppmann, "How to do distributed locking", 2016; Chubby's sequencers, Burrows 2006).
// A resource admits a write only if its token is not older than the newest it has admitted
// (see fence.hpp). Tokens are totally ordered and opaque: there is deliberately no arithmetic, so
// nobody "computes" a token instead of being granted one.
//
//   value        | meaning
//   -------------+---------------------------------------------------------------
//   0            | none: no grant carries it; fences and stores reject it
//   1..2^64-2    | issued by stores, strictly increasing per key (per store, for memory_store)
//   2^64-1       | never issued: a store whose counter reaches it reports token_exhausted
#ifndef HOLDFAST_FENCING_TOKEN_HPP
#define HOLDFAST_FENCING_TOKEN_HPP

#include <cstdint>
#include <functional>
#include <limits>
#include <ostream>
#include <string>

#include "holdfast/detail/config.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

class fencing_token;
std::string to_string(fencing_token t);

/// A fencing token: a strong, totally ordered 64-bit number; 0 means "none".
/// Thread-safety: a trivially copyable value type.
class fencing_token {
 public:
  using rep = std::uint64_t;

  /// Makes the "none" token (value 0).
  constexpr fencing_token() noexcept = default;
  /// Makes the token with the given raw value (as read back from a store or a wire format).
  constexpr explicit fencing_token(rep value) noexcept : value_(value) {}

  /// Returns the "none" token.
  static constexpr fencing_token none() noexcept { return fencing_token{}; }
  /// Returns the greatest representable token, which no store ever issues (see token_exhausted).
  static constexpr fencing_token max() noexcept {
    return fencing_token{std::numeric_limits<rep>::max()};
  }

  /// Returns the raw value, e.g. to store it next to the data it fences.
  [[nodiscard]] constexpr rep value() const noexcept { return value_; }
  /// Returns true iff this is the "none" token.
  [[nodiscard]] constexpr bool is_none() const noexcept { return value_ == 0; }
  /// Returns true iff this token can be carried by a grant: neither none nor max().
  [[nodiscard]] constexpr bool is_issuable() const noexcept {
    return value_ != 0 && value_ != std::numeric_limits<rep>::max();
  }

  friend constexpr bool operator==(fencing_token a, fencing_token b) noexcept {
    return a.value_ == b.value_;
  }
  friend constexpr bool operator!=(fencing_token a, fencing_token b) noexcept {
    return a.value_ != b.value_;
  }
  friend constexpr bool operator<(fencing_token a, fencing_token b) noexcept {
    return a.value_ < b.value_;
  }
  friend constexpr bool operator<=(fencing_token a, fencing_token b) noexcept {
    return a.value_ <= b.value_;
  }
  friend constexpr bool operator>(fencing_token a, fencing_token b) noexcept {
    return a.value_ > b.value_;
  }
  friend constexpr bool operator>=(fencing_token a, fencing_token b) noexcept {
    return a.value_ >= b.value_;
  }

  /// Prints the token as `#<value>`, or `#none`.
  template <class Char, class Traits>
  friend std::basic_ostream<Char, Traits>& operator<<(std::basic_ostream<Char, Traits>& os,
                                                      fencing_token t) {
    return os << to_string(t).c_str();  // one text form: to_string()
  }

 private:
  rep value_ = 0;
};

/// Returns the token as text: `#<value>`, or `#none`. The one text form of a token: operator<<,
/// histories and checker timelines print this.
inline std::string to_string(fencing_token t) {
  return t.is_none() ? std::string("#none") : "#" + std::to_string(t.value());
}

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

/// Hashes a token by its value, so tokens can key unordered containers.
template <>
struct std::hash<holdfast::fencing_token> {
  std::size_t operator()(holdfast::fencing_token t) const noexcept {
    return std::hash<std::uint64_t>{}(t.value());
  }
};

#endif  // HOLDFAST_FENCING_TOKEN_HPP
