#include "reload/pod_address.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

namespace reload {
namespace {

using ::testing::HasSubstr;

kube::Pod PodWith(std::string pod_ip, std::string host_ip = "192.0.2.1") {
  kube::Pod p;
  p.metadata.name = "web";
  p.status.pod_ip = std::move(pod_ip);
  p.status.host_ip = std::move(host_ip);
  return p;
}

TEST(PodAddressTest, ClusterModeUsesThePodsOwnIp) {
  auto ip = PodActionAddress(PodWith("10.244.1.7"), true, {"192.0.2.1", "127.0.0.1"});
  ASSERT_TRUE(ip.ok()) << ip.status().message();
  EXPECT_EQ(*ip, "10.244.1.7");
  auto v6 = PodActionAddress(PodWith("fd00:0::7"), true, {});
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(*v6, "fd00::7");
}

TEST(PodAddressTest, ClusterModeRefusesWhatIsNotThePodsOwn) {
  kube::Pod host_network = PodWith("192.0.2.1");
  host_network.spec.host_network = true;
  EXPECT_THAT(PodActionAddress(host_network, true, {}).status().message(),
              HasSubstr("hostNetwork"));
  EXPECT_THAT(PodActionAddress(PodWith(""), true, {}).status().message(),
              HasSubstr("no status.podIP"));
  EXPECT_THAT(PodActionAddress(PodWith("192.0.2.1"), true, {}).status().message(),
              HasSubstr("node's own IP"));
  EXPECT_THAT(PodActionAddress(PodWith("10.0.0.5", ""), true, {"10.0.0.5"}).status().message(),
              HasSubstr("node's own network"));
  EXPECT_THAT(PodActionAddress(PodWith("169.254.169.254"), true, {}).status().message(),
              HasSubstr("link-local"));
  EXPECT_THAT(PodActionAddress(PodWith("fe80::1"), true, {}).status().message(),
              HasSubstr("link-local"));
  EXPECT_THAT(PodActionAddress(PodWith("::ffff:169.254.169.254"), true, {}).status().message(),
              HasSubstr("link-local"));
  EXPECT_THAT(PodActionAddress(PodWith("0.0.0.0"), true, {}).status().message(),
              HasSubstr("unspecified"));
  EXPECT_THAT(PodActionAddress(PodWith("224.0.0.1"), true, {}).status().message(),
              HasSubstr("multicast"));
  EXPECT_THAT(PodActionAddress(PodWith("255.255.255.255"), true, {}).status().message(),
              HasSubstr("broadcast"));
  EXPECT_THAT(PodActionAddress(PodWith("metadata.google.internal"), true, {}).status().message(),
              HasSubstr("not a numeric IP address"));
  EXPECT_THAT(PodActionAddress(PodWith("10.0.0.1:80"), true, {}).status().message(),
              HasSubstr("not a numeric IP address"));
}

TEST(PodAddressTest, IPv4InAnyIPv6SpellingIsThatIPv4Address) {
  EXPECT_EQ(*CanonicalIp("::ffff:10.1.2.3"), "10.1.2.3");
  EXPECT_EQ(*CanonicalIp("0:0:0:0:0:ffff:a01:203"), "10.1.2.3");
  EXPECT_EQ(*CanonicalIp("::10.1.2.3"), "10.1.2.3");
  EXPECT_EQ(*CanonicalIp("::1"), "::1");
  EXPECT_EQ(*CanonicalIp("::"), "::");
  EXPECT_EQ(*CanonicalIp("FD00:0::7"), "fd00::7");
}

TEST(PodAddressTest, ClusterModeNeverCallsLoopbackOrTheNodeInAnySpelling) {
  for (const char* loopback :
       {"127.0.0.1", "127.0.0.2", "127.255.255.254", "::ffff:127.0.0.1", "0:0:0:0:0:ffff:7f00:1",
        "::ffff:127.0.0.2", "::127.0.0.1", "::1", "0:0:0:0:0:0:0:1"}) {
    auto refused = PodActionAddress(PodWith(loopback), true, {});
    ASSERT_FALSE(refused.ok()) << loopback;
    EXPECT_THAT(refused.status().message(), HasSubstr("is a loopback address")) << loopback;
  }
  for (const char* unspecified : {"::", "0:0:0:0:0:0:0:0", "::ffff:0.0.0.0"}) {
    EXPECT_THAT(PodActionAddress(PodWith(unspecified), true, {}).status().message(),
                HasSubstr("unspecified"))
        << unspecified;
  }
  // The node's addresses and status.hostIP, spelled as IPv6.
  EXPECT_THAT(
      PodActionAddress(PodWith("::ffff:10.0.0.5", ""), true, {"10.0.0.5"}).status().message(),
      HasSubstr("node's own network"));
  EXPECT_THAT(
      PodActionAddress(PodWith("10.0.0.5", ""), true, {"::ffff:10.0.0.5"}).status().message(),
      HasSubstr("node's own network"));
  EXPECT_THAT(PodActionAddress(PodWith("0:0:0:0:0:ffff:c000:201"), true, {}).status().message(),
              HasSubstr("node's own IP (status.hostIP)"));
  // A pod's own IPv4 address given in an IPv6 form is called as IPv4.
  auto mapped = PodActionAddress(PodWith("::ffff:10.244.1.7"), true, {"10.0.0.5"});
  ASSERT_TRUE(mapped.ok()) << mapped.status().message();
  EXPECT_EQ(*mapped, "10.244.1.7");
}

TEST(PodAddressTest, StandaloneTrustsTheManifestAndDefaultsToLoopback) {
  auto none = PodActionAddress(PodWith("", ""), false, {});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, "127.0.0.1");
  kube::Pod host_network = PodWith("127.0.0.5", "127.0.0.5");
  host_network.spec.host_network = true;
  auto own = PodActionAddress(host_network, false, {"127.0.0.5"});
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(*own, "127.0.0.5");
  EXPECT_FALSE(PodActionAddress(PodWith("169.254.169.254"), false, {}).ok());
}

TEST(PodAddressTest, NodeAddressesIncludeLoopback) {
  const std::vector<std::string> addresses = NodeAddresses();
  EXPECT_NE(std::find(addresses.begin(), addresses.end(), "127.0.0.1"), addresses.end());
}

}  // namespace
}  // namespace reload
