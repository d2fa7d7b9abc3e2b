// Event file creation (unique name, O_EXCL) and record appends with plain write().
#include "src/metrics/tensorboard_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "src/metrics/tensorboard_event.h"
#include "src/metrics/tfrecord.h"

namespace ferry {
namespace {

// Host names become part of a file name: keep them to characters that are safe there.
std::string file_name_hostname() {
  char buffer[256] = {};
  if (::gethostname(buffer, sizeof(buffer) - 1) != 0 || buffer[0] == '\0') return "localhost";
  std::string name(buffer);
  for (char& c : name) {
    const bool safe = std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
    if (!safe) c = '_';
  }
  return name;
}

std::string cannot_write(const std::filesystem::path& path, const std::string& why) {
  return "cannot write TensorBoard event file '" + path.string() + "': " + why +
         "; make output.dir writable or set logging.tensorboard: false";
}

}  // namespace

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& dir, SecondsClock wall_clock)
    : wall_clock_(std::move(wall_clock)) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InputError(cannot_write(dir, ec.message()));
  const double now = wall_clock_();
  const std::string prefix = "events.out.tfevents." + std::to_string(static_cast<int64_t>(std::floor(now))) + "." +
                             file_name_hostname() + "." + std::to_string(::getpid()) + ".";
  for (int attempt = 0; fd_ < 0; ++attempt) {
    path_ = dir / (prefix + std::to_string(attempt));
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0 && (errno != EEXIST || attempt >= 1000)) throw InputError(cannot_write(path_, std::strerror(errno)));
  }
  write_record(encode_file_version_event(now));
}

TensorBoardWriter::~TensorBoardWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void TensorBoardWriter::write_scalars(int64_t step, const MetricValues& values) {
  write_record(encode_scalars_event(wall_clock_(), step, values));
}

void TensorBoardWriter::write_session_start(int64_t step) {
  write_record(encode_session_start_event(wall_clock_(), step));
}

void TensorBoardWriter::close() {
  if (fd_ < 0) return;
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw InputError(cannot_write(path_, std::strerror(errno)));
}

void TensorBoardWriter::write_record(const std::string& event) {
  FERRY_CHECK(fd_ >= 0, "TensorBoardWriter used after close()");
  const std::string record = frame_tfrecord(event);
  size_t written = 0;
  while (written < record.size()) {
    const ssize_t n = ::write(fd_, record.data() + written, record.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InputError(cannot_write(path_, std::strerror(errno)));
    }
    written += static_cast<size_t>(n);
  }
}

}  // namespace ferry
