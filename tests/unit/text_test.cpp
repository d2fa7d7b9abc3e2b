// Edit distance, suggestions and byte sizes.
#include <gtest/gtest.h>

#include "core/byte_size.h"
#include "core/text.h"

namespace ferry {

TEST(Text, EditDistance) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("lerning_rate", "learning_rate"), 1u);
}

TEST(Text, ClosestMatchSuggestsTyposOnly) {
  const std::vector<std::string> keys{"learning_rate", "max_steps", "micro_batch_size", "seed"};
  EXPECT_EQ(closest_match("lerning_rate", keys), "learning_rate");
  EXPECT_EQ(closest_match("max_step", keys), "max_steps");
  EXPECT_EQ(closest_match("zzzzzz", keys), "");
  EXPECT_EQ(did_you_mean("sede", keys), " (did you mean 'seed'?)");
}

TEST(ByteSize, ParsesUnits) {
  EXPECT_EQ(parse_byte_size("8GiB"), 8ull << 30);
  EXPECT_EQ(parse_byte_size("512MiB"), 512ull << 20);
  EXPECT_EQ(parse_byte_size("1.5GB"), 1500000000ull);
  EXPECT_EQ(parse_byte_size("4096"), 4096ull);
  EXPECT_EQ(parse_byte_size(" 2 gib "), 2ull << 30);
  EXPECT_EQ(parse_byte_size("0"), 0ull);
  EXPECT_FALSE(parse_byte_size("8 GiBs").has_value());
  EXPECT_FALSE(parse_byte_size("GiB").has_value());
  EXPECT_FALSE(parse_byte_size("-1GiB").has_value());
  EXPECT_FALSE(parse_byte_size("").has_value());
}

TEST(ByteSize, FormatsExactly) {
  EXPECT_EQ(format_byte_size(8ull << 30), "8GiB");
  EXPECT_EQ(format_byte_size(1536ull << 20), "1536MiB");
  EXPECT_EQ(format_byte_size(1000), "1000");
  EXPECT_EQ(format_byte_size(0), "0");
  EXPECT_EQ(format_bytes_approx(1536ull << 20), "1.50 GiB");
  EXPECT_EQ(parse_byte_size(format_byte_size(3ull << 40)), 3ull << 40);
}

}  // namespace ferry
