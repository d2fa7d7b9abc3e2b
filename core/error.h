// Ferry's typed errors. Library code throws them; the CLI catches them once and maps them to exit
// codes: UserError (bad config, bad input file, impossible request) -> 2, anything else -> 1.
// Messages are written for the user: what was wrong, where (file:line or key path), what to do.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace ferry {

// Base of every error Ferry throws on purpose.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The user can fix it: a config key, an input file, a command-line flag. Exit code 2.
class UserError : public Error {
 public:
  using Error::Error;
};

// A config file or override is wrong; the message names the file/line or --set and the key path.
class ConfigError : public UserError {
 public:
  using UserError::UserError;
};

// An input file (data, checkpoint, tokenizer) is missing or malformed; names the file (and line).
class InputError : public UserError {
 public:
  using UserError::UserError;
};

// A run stopped by SIGINT/SIGTERM after saving its checkpoint (the message says which and how to
// resume). Exit code 128 + the signal, as a shell reports a process killed by it, so scripts and
// `ferry pipeline` do not take an interrupted stage for a finished one.
class Interrupted : public Error {
 public:
  Interrupted(int signal_number, const std::string& message) : Error(message), signal_number_(signal_number) {}
  int signal_number() const { return signal_number_; }

 private:
  int signal_number_;
};

// Another process of a data-parallel run failed or stopped answering (src/dist): the message says
// which collective and what to check. Exit code 1.
class PeerError : public Error {
 public:
  using Error::Error;
};

// A bug or broken invariant inside Ferry. Exit code 1.
class InternalError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
}  // namespace detail

}  // namespace ferry

// Invariant check: throws InternalError naming the file and line. For conditions the user cannot
// cause; user-facing checks throw UserError subclasses with a message that says what to do.
#define FERRY_CHECK(cond, ...)                                                              \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      throw ::ferry::InternalError(::ferry::detail::concat(                                 \
          __FILE__, ":", __LINE__, ": internal check failed: " #cond ". " __VA_OPT__(, ) __VA_ARGS__)); \
    }                                                                                       \
  } while (0)
