// common/rpc/rpc_unittest.cc — token rule and status conversion.
#include <gtest/gtest.h>
#include <unistd.h>

#include "common/rpc/address.h"
#include "common/rpc/local_identity.h"
#include "common/rpc/status.h"
#include "common/rpc/token.h"

namespace xpu::rpc {
namespace {

TEST(AddressTest, SplitsEveryForm) {
  EXPECT_EQ(SplitAddress("127.0.0.1:7441")->host, "127.0.0.1");
  EXPECT_EQ(SplitAddress("127.0.0.1:7441")->port, "7441");
  EXPECT_EQ(SplitAddress("[::1]:80")->host, "::1");
  EXPECT_EQ(SplitAddress("[::1]:80")->port, "80");
  EXPECT_EQ(SplitAddress("dns:///localhost:9")->host, "localhost");
  EXPECT_EQ(SplitAddress("ipv4:10.0.0.1:9")->host, "10.0.0.1");
  EXPECT_EQ(SplitAddress("::1")->host, "::1");
  EXPECT_TRUE(SplitAddress("unix:/run/x.sock")->unix_socket);
  EXPECT_FALSE(SplitAddress("[::1:80").ok());
}

TEST(AddressTest, LoopbackOnlyWhenEveryResolvedAddressIs) {
  EXPECT_TRUE(IsLoopback("127.0.0.1:7441"));
  EXPECT_TRUE(IsLoopback("127.3.4.5:1"));
  EXPECT_TRUE(IsLoopback("[::1]:1"));
  EXPECT_TRUE(IsLoopback("[::ffff:127.0.0.1]:1"));
  EXPECT_TRUE(IsLoopback("localhost:1"));
  EXPECT_TRUE(IsLoopback("unix:/tmp/x"));
  EXPECT_FALSE(IsLoopback("0.0.0.0:7441"));  // every address
  EXPECT_FALSE(IsLoopback("[::]:7441"));
  EXPECT_FALSE(IsLoopback(":7441"));
  EXPECT_FALSE(IsLoopback("8.8.8.8:7441"));
  EXPECT_FALSE(IsLoopback("[2001:db8::1]:7441"));
  // Judged by what it resolves to, never by its spelling.
  EXPECT_FALSE(IsLoopback("127.evil.invalid:7441"));
  EXPECT_FALSE(IsLoopback("localhost.evil.invalid:7441"));
  EXPECT_EQ(CheckLoopback("8.8.8.8:1").code(), absl::StatusCode::kFailedPrecondition);
}

TEST(LocalIdentityTest, NothingListeningIsNotFound) {
  EXPECT_EQ(FetchLocalIdentityFrom("xpu-engine-test-nobody-" + std::to_string(getpid()), 100)
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(FetchLocalIdentity("8.8.8.8:7441").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

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
