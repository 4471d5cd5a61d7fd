// common/rpc/rpc_unittest.cc — token rule and status conversion.
#include <gtest/gtest.h>

#include "common/rpc/status.h"
#include "common/rpc/token.h"

namespace xpu::rpc {
namespace {

TEST(TokenTest, EqualOnlyForTheSameNonEmptySecret) {
  EXPECT_TRUE(TokensEqual("s3cret", "s3cret"));
  EXPECT_FALSE(TokensEqual("s3creT", "s3cret"));
  EXPECT_FALSE(TokensEqual("s3cre", "s3cret"));
  EXPECT_FALSE(TokensEqual("s3cret!", "s3cret"));
  EXPECT_FALSE(TokensEqual("", "s3cret"));
  EXPECT_FALSE(TokensEqual("", ""));
  EXPECT_FALSE(TokensEqual("anything", ""));
  // Bytes >= 0x80 compare as bytes.
  EXPECT_TRUE(TokensEqual("\xff\x80x", "\xff\x80x"));
  EXPECT_FALSE(TokensEqual("\xff\x80x", "\xff\x81x"));
}

TEST(StatusTest, CodesAndMessagesCrossTheEdgeUnchanged) {
  for (absl::StatusCode c : {absl::StatusCode::kInvalidArgument, absl::StatusCode::kNotFound,
                             absl::StatusCode::kFailedPrecondition, absl::StatusCode::kUnavailable,
                             absl::StatusCode::kDeadlineExceeded,
                             absl::StatusCode::kResourceExhausted, absl::StatusCode::kInternal,
                             absl::StatusCode::kUnauthenticated, absl::StatusCode::kCancelled}) {
    const absl::Status in(c, "why");
    const grpc::Status g = ToGrpcStatus(in);
    EXPECT_EQ(static_cast<int>(g.error_code()), static_cast<int>(c));
    EXPECT_EQ(g.error_message(), "why");
    EXPECT_EQ(ToAbslStatus(g), in);
  }
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(ToAbslStatus(grpc::Status::OK).ok());
}

}  // namespace
}  // namespace xpu::rpc
