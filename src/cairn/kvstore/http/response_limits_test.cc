// The rules of response_limits.h and listing_pages.h on their own (the
// hostile server of tests/python/test_object_store_bounds.py tries them
// through the drivers).
#include "cairn/kvstore/http/response_limits.h"

#include <gtest/gtest.h>

#include "cairn/kvstore/http/http_client.h"
#include "cairn/kvstore/http/listing_pages.h"

namespace cairn::http {
namespace {

TEST(ParseContentLength, TakesOnlyDecimalByteCountsThatFit) {
  EXPECT_EQ(ParseContentLength("0"), 0u);
  EXPECT_EQ(ParseContentLength("1024"), 1024u);
  EXPECT_EQ(ParseContentLength("18446744073709551615"), UINT64_MAX);
  for (const char* bad : {"", "-5", "+5", "1.5", "5 ", "0x10", "18446744073709551616", "99999999999999999999",
                          "123456789012345678901"}) {
    EXPECT_EQ(ParseContentLength(bad), std::nullopt) << bad;
  }
}

TEST(BodyLimitFor, ChoosesTheBoundByStatus) {
  HttpCall call;
  call.max_response_bytes = 1000;
  call.max_partial_response_bytes = 10;
  EXPECT_EQ(BodyLimitFor(call, 200).bytes, 1000u);
  EXPECT_EQ(BodyLimitFor(call, 206).bytes, 10u);
  EXPECT_EQ(BodyLimitFor(call, 404).bytes, kMaxErrorBodyBytes);  // not the read's bound
  call.max_response_bytes = uint64_t{1} << 40;
  EXPECT_EQ(BodyLimitFor(call, 500).bytes, kMaxErrorBodyBytes);
  uint8_t dst[7];
  call.destination = MutableByteView(dst, sizeof(dst));
  EXPECT_EQ(BodyLimitFor(call, 200).bytes, 7u);
  EXPECT_EQ(BodyLimitFor(call, 206).bytes, 7u);
  EXPECT_EQ(BodyLimitFor(call, 503).bytes, kMaxErrorBodyBytes);
}

TEST(MinimumRateRule, FailsADripAtTheGraceAndNeverAFastTransfer) {
  MinimumRateRule rule{std::chrono::seconds(10), 1000};
  using std::chrono::seconds;
  EXPECT_FALSE(rule.TooSlow(seconds(10), 0));        // within the grace
  EXPECT_TRUE(rule.TooSlow(seconds(11), 2 * 11));    // a drip of 2 bytes/s
  EXPECT_FALSE(rule.TooSlow(seconds(11), 2000));     // 2 s of credit at 1000 bytes/s
  EXPECT_TRUE(rule.TooSlow(seconds(13), 2000));
  EXPECT_FALSE(rule.TooSlow(seconds(1000), 1000 * 1000));  // exactly the minimum, from the start
  EXPECT_FALSE(rule.TooSlow(seconds(1000000), UINT64_MAX));
  EXPECT_FALSE((MinimumRateRule{seconds(1), 0}).TooSlow(seconds(1000), 0));  // off
}

TEST(ListingPages, EndsAtTheCapAndAtARepeatedToken) {
  ListingPages capped(3);
  EXPECT_TRUE(capped.Continue("a", "listing").ok());
  EXPECT_TRUE(capped.Continue("b", "listing").ok());
  Status over = capped.Continue("c", "listing");
  EXPECT_EQ(over.code(), StatusCode::kDataLoss);
  EXPECT_NE(over.message().find("past 3 pages"), std::string_view::npos) << over.message();

  ListingPages cycle(100);
  EXPECT_TRUE(cycle.Continue("a", "listing").ok());
  EXPECT_TRUE(cycle.Continue("b", "listing").ok());
  Status again = cycle.Continue("a", "listing of s3://b/ (GET http://h/b/?x)");
  EXPECT_EQ(again.code(), StatusCode::kDataLoss);
  EXPECT_NE(again.message().find("GET http://h/b/?x"), std::string_view::npos) << again.message();
  EXPECT_FALSE(ListingPages(100).Continue("", "listing").ok());
}

}  // namespace
}  // namespace cairn::http
