// CRC-32C against published test vectors (RFC 3720 appendix B.4, and the "123456789" check value
// of the CRC catalogue), the hardware path against the software one, and TFRecord's mask against
// values computed by the Python tensorboard package's own implementation.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "src/metrics/crc32c.h"

namespace ferry {
namespace {

std::string bytes_of(std::initializer_list<int> values) {
  std::string out;
  for (int v : values) out.push_back(static_cast<char>(v));
  return out;
}

std::string sequence(int first, int step, int count) {
  std::string out;
  for (int i = 0; i < count; ++i) out.push_back(static_cast<char>(first + step * i));
  return out;
}

struct Vector {
  const char* name;
  std::string data;
  uint32_t crc;
};

std::vector<Vector> published_vectors() {
  return {
      {"empty", "", 0x00000000u},
      {"check 123456789", "123456789", 0xE3069283u},
      {"32 zero bytes", std::string(32, '\0'), 0x8A9136AAu},
      {"32 0xFF bytes", std::string(32, '\xFF'), 0x62A8AB43u},
      {"32 incrementing bytes", sequence(0x00, 1, 32), 0x46DD794Eu},
      {"32 decrementing bytes", sequence(0x1F, -1, 32), 0x113FDB5Cu},
      {"iSCSI read command PDU",
       bytes_of({0x01, 0xC0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18,
                 0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}),
       0xD9963A56u},
  };
}

TEST(MetricsCrc32c, SoftwareMatchesPublishedVectors) {
  for (const auto& v : published_vectors()) EXPECT_EQ(crc32c_software(v.data), v.crc) << v.name;
}

TEST(MetricsCrc32c, DispatchedMatchesPublishedVectors) {
  for (const auto& v : published_vectors()) EXPECT_EQ(crc32c(v.data), v.crc) << v.name;
}

TEST(MetricsCrc32c, HardwareMatchesPublishedVectors) {
  if (!crc32c_hardware_available()) GTEST_SKIP() << "[needs sse42] no SSE4.2 on this CPU";
  for (const auto& v : published_vectors()) EXPECT_EQ(crc32c_hardware(v.data), v.crc) << v.name;
}

TEST(MetricsCrc32c, ExtendingEqualsWholeBuffer) {
  const std::string text = "The quick brown fox jumps over the lazy dog, twice over.";
  const uint32_t whole = crc32c_software(text);
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    const std::string_view view(text);
    EXPECT_EQ(crc32c_software(view.substr(cut), crc32c_software(view.substr(0, cut))), whole) << cut;
    EXPECT_EQ(crc32c(view.substr(cut), crc32c(view.substr(0, cut))), whole) << cut;
  }
}

TEST(MetricsCrc32c, HardwareAgreesWithSoftwareOnEveryLengthAndAlignment) {
  if (!crc32c_hardware_available()) GTEST_SKIP() << "[needs sse42] no SSE4.2 on this CPU";
  std::mt19937 rng(7);
  std::string buffer(300, '\0');
  for (char& c : buffer) c = static_cast<char>(rng());
  for (size_t offset = 0; offset < 9; ++offset) {
    for (size_t length = 0; length + offset <= buffer.size(); length += 7) {
      const std::string_view part(buffer.data() + offset, length);
      ASSERT_EQ(crc32c_hardware(part), crc32c_software(part)) << "offset " << offset << " length " << length;
    }
  }
}

// Reference values: tensorboard.compat.tensorflow_stub.pywrap_tensorflow.masked_crc32c(data).
TEST(MetricsCrc32c, MaskMatchesTensorBoard) {
  EXPECT_EQ(mask_crc32c(crc32c("123456789")), 0xC78AB0E5u);
  EXPECT_EQ(mask_crc32c(crc32c(std::string(32, '\0'))), 0x0FD7FFFAu);
  // The TFRecord header CRC of a 24-byte record: the 8 little-endian bytes of the length.
  EXPECT_EQ(mask_crc32c(crc32c(bytes_of({24, 0, 0, 0, 0, 0, 0, 0}))), 0x224B7FA3u);
}

TEST(MetricsCrc32c, UnmaskInvertsMask) {
  for (uint32_t crc : {0u, 1u, 0x8A9136AAu, 0xFFFFFFFFu, 0x5D5D0000u}) EXPECT_EQ(unmask_crc32c(mask_crc32c(crc)), crc);
}

}  // namespace
}  // namespace ferry
