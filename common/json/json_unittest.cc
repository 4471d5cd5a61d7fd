#include "common/json/json.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace xpu::json {
namespace {

TEST(JsonTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(Quote(std::string("a\"b\\c\n\x01", 7)), "\"a\\\"b\\\\c\\n\\u0001\"");
}

TEST(JsonTest, NonAsciiTextStaysUtf8) {
  // Multi-byte UTF-8 (2, 3 and 4 bytes) passes through unchanged, never as
  // one \u00XX escape per byte.
  const std::string text =
      "gr\xC3\xBC\xC3\x9F"
      "e \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x9A\x80";
  EXPECT_EQ(Quote(text), "\"" + text + "\"");
  Json j;
  j["host"] =
      "n\xC3\xB6"
      "de-1";
  EXPECT_EQ(Dump(j),
            "{\"host\":\"n\xC3\xB6"
            "de-1\"}");
  EXPECT_EQ(Json::parse(Dump(j))["host"],
            "n\xC3\xB6"
            "de-1");
}

TEST(JsonTest, InvalidUtf8BecomesReplacementCharacter) {
  // A Latin-1 byte and a truncated 3-byte sequence.
  const std::string out = Quote("caf\xE9 \xE6\x97");
  EXPECT_EQ(out, "\"caf\xEF\xBF\xBD \xEF\xBF\xBD\"");
  EXPECT_NO_THROW(Json::parse(out));
}

TEST(JsonTest, KeepsInsertionOrderAndWholeNumbers) {
  Json j;
  j["zeta"] = 1;
  j["alpha"] = Count(1024.0);
  j["big"] = std::numeric_limits<uint64_t>::max();
  j["frac"] = Count(2.5);
  j["nan"] = std::nan("");
  EXPECT_EQ(Dump(j),
            "{\"zeta\":1,\"alpha\":1024,\"big\":18446744073709551615,\"frac\":2.5,\"nan\":null}");
}

TEST(JsonTest, Rounding) {
  EXPECT_EQ(Dump(Json(Significant(0.123456789, 6))), "0.123457");
  EXPECT_EQ(Dump(Json(Fixed(1.23456, 3))), "1.235");
  EXPECT_TRUE(std::isnan(Significant(std::nan(""), 4)));
}

}  // namespace
}  // namespace xpu::json
