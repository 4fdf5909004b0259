// ApiIdentity: the node test, the client certificate's subject (CN, O) read from DER, and errors
// on broken certificates. LookUpIdentity against a server is covered by the preflight tests.
#include "cmd/volumemanager/api_identity.h"

#include <gtest/gtest.h>

namespace volumemanager {
namespace {

// Self-signed v3 certificate: O=system:nodes, O=extra, CN=system:node:node-a.
constexpr char kNodeV3[] =
    "-----BEGIN CERTIFICATE-----\n"
    "MIIB3zCCAYWgAwIBAgIUUdIyIT7O9IA54omewEh8ZRfkzAIwCgYIKoZIzj0EAwIw\n"
    "RDEVMBMGA1UECgwMc3lzdGVtOm5vZGVzMQ4wDAYDVQQKDAVleHRyYTEbMBkGA1UE\n"
    "AwwSc3lzdGVtOm5vZGU6bm9kZS1hMCAXDTI2MTEyNzIwNTMzNFoYDzIxMjYxMTAz\n"
    "MjA1MzM0WjBEMRUwEwYDVQQKDAxzeXN0ZW06bm9kZXMxDjAMBgNVBAoMBWV4dHJh\n"
    "MRswGQYDVQQDDBJzeXN0ZW06bm9kZTpub2RlLWEwWTATBgcqhkjOPQIBBggqhkjO\n"
    "PQMBBwNCAASPg/fMYFOSNU6YijhI9OLGe1FmfccOjVGJSADt2FHVxcFRsprWQG7d\n"
    "Dvad+pV4bNqPyLctf6eBd78RuyC4manJo1MwUTAdBgNVHQ4EFgQU6l3nKJQZVLh0\n"
    "9htGK651EGxjM4YwHwYDVR0jBBgwFoAU6l3nKJQZVLh09htGK651EGxjM4YwDwYD\n"
    "VR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiBJLcTCJg/sjHxsGuof5zIN\n"
    "D4NHaX8nzfMSTLOLEe1bSwIhAK5z2zsukR+NRR8ubBgeK7/tICuajxund/By8t4m\n"
    "nyxK\n"
    "-----END CERTIFICATE-----\n";
// v1 certificate (no version field), issued by CN=issuer-ca, O=issuer-org; subject as above.
constexpr char kNodeV1Issued[] =
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBazCCARACFA2YBwNqDgKnvG168+aSg5x8LVRHMAoGCCqGSM49BAMCMCkxEzAR\n"
    "BgNVBAoMCmlzc3Vlci1vcmcxEjAQBgNVBAMMCWlzc3Vlci1jYTAgFw0yNjExMjcy\n"
    "MDUzMzhaGA8yMTI2MTEwMzIwNTMzOFowRDEVMBMGA1UECgwMc3lzdGVtOm5vZGVz\n"
    "MQ4wDAYDVQQKDAVleHRyYTEbMBkGA1UEAwwSc3lzdGVtOm5vZGU6bm9kZS1hMFkw\n"
    "EwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEwTqCcOMtheCMgKxq0er3YKaFPZstEvdI\n"
    "jWa9yhZFZNlzndor5RU+vA/xbjDChp9AHxRr/3diYLCqB2RqNccOMzAKBggqhkjO\n"
    "PQQDAgNJADBGAiEAzWI1PdI8lMjqKTHHbOUVHtn+Qhz8u/Opot4LjPxDXIYCIQCJ\n"
    "ugSJZ0U9jIbp2o5BksFM169YUSWA5BR3OfTBZNSd0Q==\n"
    "-----END CERTIFICATE-----\n";
// v3 certificate whose subject is O=acme only (no CN).
constexpr char kNoCommonName[] =
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBdTCCARugAwIBAgIUJxPUsb0yE36UHmnmukWBz+sUPBIwCgYIKoZIzj0EAwIw\n"
    "DzENMAsGA1UECgwEYWNtZTAgFw0yNjExMjcyMDUzMzRaGA8yMTI2MTEwMzIwNTMz\n"
    "NFowDzENMAsGA1UECgwEYWNtZTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABGm2\n"
    "mY7HtNtOQgs7dK1xdiG0Gs0UYY9qAn/W4P3Hgnq/9BACyq1VlrvJuyt4FsImCISq\n"
    "UVxxQnauApkputf1KjWjUzBRMB0GA1UdDgQWBBTSE8p8SjqHEol1pvbF6nDHPLYD\n"
    "+DAfBgNVHSMEGDAWgBTSE8p8SjqHEol1pvbF6nDHPLYD+DAPBgNVHRMBAf8EBTAD\n"
    "AQH/MAoGCCqGSM49BAMCA0gAMEUCIQCmnd5FzU7Ye925W2tJr/TgRKzhRG24iTm9\n"
    "sLoVwyOOywIgAaGYg+3TRUqyjiv3VVJMXYGlPqTcvj//cP6VNmOW8NY=\n"
    "-----END CERTIFICATE-----\n";

TEST(ApiIdentityTest, NodeNameNeedsThePrefixAndTheGroup) {
  struct Case {
    const char* name;
    ApiIdentity identity;
    std::optional<std::string> node;
  };
  const Case cases[] = {
      {"node", {"system:node:a", {"system:nodes", "system:authenticated"}, ""}, "a"},
      {"no group", {"system:node:a", {"system:authenticated"}, ""}, std::nullopt},
      {"service account", {"system:serviceaccount:vm:vm", {"system:nodes"}, ""}, std::nullopt},
      {"prefix only in the middle", {"x-system:node:a", {"system:nodes"}, ""}, std::nullopt},
      {"empty node name", {"system:node:", {"system:nodes"}, ""}, ""},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.identity.NodeName(), c.node) << c.name;
  }
  EXPECT_EQ(cases[0].identity.ModeName(), "node \"a\"");
  EXPECT_EQ(cases[2].identity.ModeName(), "service account or other user");
}

TEST(ApiIdentityTest, ReadsTheSubjectOfAClientCertificate) {
  for (const char* pem : {kNodeV3, kNodeV1Issued}) {
    auto identity = IdentityOfClientCertificate(pem);
    ASSERT_TRUE(identity.ok()) << identity.status().message();
    EXPECT_EQ(identity->username, "system:node:node-a");
    EXPECT_EQ(identity->groups, (std::vector<std::string>{"system:nodes", "extra"}));
    EXPECT_EQ(identity->NodeName(), "node-a");
  }
}

TEST(ApiIdentityTest, TheFirstCertificateOfAPemWithKeyAndChain) {
  // kubelet-client-current.pem holds the certificate and its key; a chain follows the leaf.
  const std::string pem = std::string(
                              "-----BEGIN EC PRIVATE KEY-----\nAAAA\n"
                              "-----END EC PRIVATE KEY-----\n") +
                          kNodeV1Issued + kNoCommonName;
  auto identity = IdentityOfClientCertificate(pem);
  ASSERT_TRUE(identity.ok()) << identity.status().message();
  EXPECT_EQ(identity->username, "system:node:node-a");
}

TEST(ApiIdentityTest, BrokenCertificatesAreErrors) {
  auto no_cn = IdentityOfClientCertificate(kNoCommonName);
  ASSERT_FALSE(no_cn.ok());
  EXPECT_EQ(no_cn.status().message(), "client certificate: the subject has no CN");
  EXPECT_FALSE(IdentityOfClientCertificate("not a pem").ok());
  std::string pem = kNodeV3;
  // Cut the base64 after the subject's start: a truncated DER element.
  const std::string head = pem.substr(0, pem.find('\n') + 1);
  const std::string truncated =
      head + pem.substr(head.size(), 64 * 2 + 2) + "\n-----END CERTIFICATE-----\n";
  auto cut = IdentityOfClientCertificate(truncated);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("client certificate: "), std::string::npos);
  auto bad_base64 =
      IdentityOfClientCertificate("-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----");
  EXPECT_FALSE(bad_base64.ok());
}

// IsReviewNotServed reads LookUpIdentity's code, not its text (LookUpIdentity's side:
// tests/cmd/volumemanager/preflight_test.cc, AReviewNotServedWithoutACertificateIsMarkedByItsCode).
TEST(ApiIdentityTest, IsReviewNotServedReadsTheCode) {
  EXPECT_TRUE(IsReviewNotServed(
      base::Status::Error(base::StatusCode::kUnimplemented, "SelfSubjectReview: 404")));
  EXPECT_FALSE(IsReviewNotServed(base::Status::Error(
      "the server does not serve SelfSubjectReview (404 NotFound); the credentials hold no "
      "client certificate to read")));
  EXPECT_FALSE(IsReviewNotServed(base::Status::OK()));
}

}  // namespace
}  // namespace volumemanager
