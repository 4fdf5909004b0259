#include "kubeclient/transport/server_url.h"

#include <gtest/gtest.h>

namespace kubeclient {
namespace {

TEST(ServerUrlTest, HttpsWithPortAndPrefix) {
  ServerUrl url;
  ASSERT_TRUE(SplitServerUrl("https://api.example:6443/k8s/clusters/c1", &url));
  EXPECT_EQ(url.host, "api.example");
  EXPECT_EQ(url.port, "6443");
  EXPECT_EQ(url.rest, "/k8s/clusters/c1");
  EXPECT_TRUE(url.https);
  EXPECT_FALSE(url.ipv6);
  EXPECT_FALSE(url.userinfo);
}

TEST(ServerUrlTest, TheSchemesPortWhenNoneIsNamed) {
  ServerUrl https;
  ASSERT_TRUE(SplitServerUrl("https://10.0.0.1", &https));
  EXPECT_EQ(https.port, "443");
  EXPECT_EQ(https.rest, "");
  ServerUrl http;
  ASSERT_TRUE(SplitServerUrl("http://10.0.0.1/", &http));
  EXPECT_EQ(http.port, "80");
  EXPECT_EQ(http.rest, "/");
  EXPECT_FALSE(http.https);
}

TEST(ServerUrlTest, Ipv6InBrackets) {
  ServerUrl url;
  ASSERT_TRUE(SplitServerUrl("https://[::1]:6443", &url));
  EXPECT_EQ(url.host, "::1");
  EXPECT_EQ(url.port, "6443");
  EXPECT_TRUE(url.ipv6);
  ServerUrl no_port;
  ASSERT_TRUE(SplitServerUrl("https://[fd00::10]/p", &no_port));
  EXPECT_EQ(no_port.host, "fd00::10");
  EXPECT_EQ(no_port.port, "443");
  EXPECT_EQ(no_port.rest, "/p");
}

TEST(ServerUrlTest, UserinfoIsNotedAndTheHostTakenAfterIt) {
  ServerUrl url;
  ASSERT_TRUE(SplitServerUrl("https://user:p@ss@api.example:8443/x", &url));
  EXPECT_TRUE(url.userinfo);
  EXPECT_EQ(url.host, "api.example");
  EXPECT_EQ(url.port, "8443");
  EXPECT_EQ(url.host.find("ss"), std::string::npos);
}

TEST(ServerUrlTest, WhatIsNotThatShapeIsRefused) {
  ServerUrl url;
  EXPECT_FALSE(SplitServerUrl("ftp://api.example", &url));
  EXPECT_FALSE(SplitServerUrl("api.example:6443", &url));
  EXPECT_FALSE(SplitServerUrl("https://", &url));
  EXPECT_FALSE(SplitServerUrl("https://[::1", &url));
  EXPECT_FALSE(SplitServerUrl("https://:6443", &url));
}

}  // namespace
}  // namespace kubeclient
