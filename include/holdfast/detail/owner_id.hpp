// SPDX-License-Identifier: MIT
// holdfast/detail/owner_id.hpp - owner_id: the owner id a lease keeps, without a heap allocation
// for the ids acquire makes and most ids callers give.
//
// Not a public header. A generated owner id is 32 hex digits (detail/random.hpp), with a label
// 33 more characters than the label: longer than any std::string keeps inline (15 in libstdc++),
// so a lease that kept its id in a std::string paid an allocation and a free for every acquire
// (issue 26 item 3: ~200 instructions, a tenth of what the handle adds on memory_store). An
// owner_id keeps up to inline_capacity characters in itself and only a longer id on the heap.
// lease::owner() still returns a `const std::string&`: that string is spelled out the first time
// it is asked for (one allocation then, none if nobody asks), and kept until the id goes.
//
// Thread-safety: const members may be called concurrently (as for std::string): the string that
// owner() returns is published with one compare-and-swap, and view() never touches it for an id
// kept inline. Copying or moving needs exclusive access to the source, as for any object.
#ifndef HOLDFAST_DETAIL_OWNER_ID_HPP
#define HOLDFAST_DETAIL_OWNER_ID_HPP

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "holdfast/detail/config.hpp"
#include "holdfast/detail/random.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

// An owner id: inline up to inline_capacity characters, else a std::string on the heap.
class owner_id {
 public:
  // 47 characters: a generated id (32) with a label of up to 14, and most ids callers choose; the
  // whole object is 64 bytes, one cache line.
  static constexpr std::size_t inline_capacity = 47;

  owner_id() noexcept = default;
  // A copy of `id` (allocates only if it is longer than inline_capacity).
  explicit owner_id(std::string_view id) { copy_in(id); }
  // `id` itself when it is too long to keep inline (no copy), else a copy of its characters.
  explicit owner_id(std::string&& id) {
    if (id.size() <= inline_capacity) {
      copy_in(id);
    } else {
      size_ = id.size();
      spelled_.store(new std::string(std::move(id)), std::memory_order_relaxed);
    }
  }
  owner_id(const owner_id& other) { copy_in(other.view()); }
  owner_id(owner_id&& other) noexcept { take(other); }
  owner_id& operator=(const owner_id& other) {
    if (this != &other) {
      owner_id copy(other);
      *this = std::move(copy);
    }
    return *this;
  }
  owner_id& operator=(owner_id&& other) noexcept {
    if (this != &other) {
      drop();
      take(other);
    }
    return *this;
  }
  ~owner_id() { drop(); }

  // The id's characters; valid while this id lives unchanged.
  [[nodiscard]] std::string_view view() const noexcept {
    if (size_ <= inline_capacity) return std::string_view(chars(), size_);
    return *spelled_.load(std::memory_order_relaxed);  // set before anyone could read it
  }
  operator std::string_view() const noexcept { return view(); }  // NOLINT: implicit by design
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }

  // The id as a std::string, spelled out on the first call (may throw std::bad_alloc then); the
  // same string on every later call, until this id is assigned, moved from or destroyed.
  [[nodiscard]] const std::string& str() const {
    std::string* s = spelled_.load(std::memory_order_acquire);
    if (s != nullptr) return *s;
    std::string* made = new std::string(chars(), size_);
    if (spelled_.compare_exchange_strong(s, made, std::memory_order_acq_rel)) return *made;
    delete made;  // another thread spelled it first: `s` now holds its string
    return *s;
  }

  // Makes this a fresh generated id: `<label>/<32 random hex digits>`, or the digits alone for
  // an empty label (labelled_owner_id's form), written in place when it fits.
  void generate(const std::string& label) {
    const std::size_t n = label.empty() ? 32 : label.size() + 1 + 32;
    if (n > inline_capacity) {
      *this = owner_id(labelled_owner_id(label));
      return;
    }
    drop();
    char* at = chars();
    if (!label.empty()) {
      at = std::copy_n(label.data(), label.size(), at);
      *at++ = owner_separator;
    }
    random_owner_digits(at);
    size_ = n;
  }

  // Makes this a copy of `id` in place (no temporary to move from: a move right after the copy
  // would read back its bytes before the copy's stores have landed, a store-forwarding stall).
  void assign(std::string_view id) {
    drop();
    copy_in(id);
  }

 private:
  void copy_in(std::string_view id) {
    if (id.size() <= inline_capacity) {
      if (!id.empty()) std::memcpy(chars(), id.data(), id.size());
      size_ = id.size();
    } else {
      spelled_.store(new std::string(id), std::memory_order_relaxed);
      size_ = id.size();
    }
  }
  // Moving and dropping need exclusive access (as for any object), so they load and store the
  // pointer plainly: an atomic exchange would be a locked instruction on every lease's move.
  // The characters go as six words, written out: GCC expanded a memcpy of them into `rep movs`
  // where it judged the block cold, a slow start (a quarter of perf's samples in the handle's
  // own code, issue 26 item 3).
  void take(owner_id& other) noexcept {
    size_ = other.size_;
    words_[0] = other.words_[0];
    words_[1] = other.words_[1];
    words_[2] = other.words_[2];
    words_[3] = other.words_[3];
    words_[4] = other.words_[4];
    words_[5] = other.words_[5];
    spelled_.store(other.spelled_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    other.spelled_.store(nullptr, std::memory_order_relaxed);
    other.size_ = 0;  // a moved-from id is empty
  }
  void drop() noexcept {
    delete spelled_.load(std::memory_order_relaxed);
    spelled_.store(nullptr, std::memory_order_relaxed);
    size_ = 0;
  }

  char* chars() noexcept { return reinterpret_cast<char*>(words_); }
  const char* chars() const noexcept { return reinterpret_cast<const char*>(words_); }

  std::size_t size_ = 0;
  // The id's characters when it fits (the first size_ bytes), as words so that a move copies
  // six of them (zeroed first, so a move never reads an indeterminate word).
  std::uint64_t words_[(inline_capacity + 1) / 8]{};  // NOLINT(modernize-avoid-c-arrays)
  mutable std::atomic<std::string*> spelled_{nullptr};
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_DETAIL_OWNER_ID_HPP
