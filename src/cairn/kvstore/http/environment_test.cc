// The settings the object-store drivers read from the environment
// (environment.h): which certificate authorities TLS trusts, in the order
// of the variables, and a clear error for a path that is not there.
#include "cairn/kvstore/http/environment.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace cairn::http {
namespace {

constexpr const char* kCaVariables[] = {"CAIRN_CA_BUNDLE", "AWS_CA_BUNDLE", "TENSORSTORE_CA_BUNDLE",
                                        "CURL_CA_BUNDLE", "SSL_CERT_FILE", "TENSORSTORE_CA_PATH",
                                        "SSL_CERT_DIR"};

// Clears the CA variables for one test, sets `vars`, restores them after.
class ScopedCaEnv {
 public:
  explicit ScopedCaEnv(std::vector<std::pair<const char*, std::string>> vars) {
    for (const char* name : kCaVariables) {
      if (const char* v = getenv(name)) saved_.emplace_back(name, v);
      unsetenv(name);
    }
    for (auto& [k, v] : vars) setenv(k, v.c_str(), 1);
  }
  ~ScopedCaEnv() {
    for (const char* name : kCaVariables) unsetenv(name);
    for (auto& [k, v] : saved_) setenv(k.c_str(), v.c_str(), 1);
  }

 private:
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST(TlsTrustTest, FirstVariableSetWinsAndMissingPathsAreNamed) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("cairn-ca-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const std::string a = (dir / "a.pem").string(), b = (dir / "b.pem").string();
  std::ofstream(a) << "a";
  std::ofstream(b) << "b";
  {
    ScopedCaEnv env({});
    Result<TlsTrust> t = TlsTrustFromEnvironment();
    ASSERT_TRUE(t.ok());
    EXPECT_TRUE(t->ca_bundle.empty() && t->ca_path.empty() && t->variables.empty());
  }
  {
    ScopedCaEnv env({{"SSL_CERT_FILE", b}, {"CAIRN_CA_BUNDLE", a}, {"SSL_CERT_DIR", dir.string()}});
    Result<TlsTrust> t = TlsTrustFromEnvironment();
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->ca_bundle, a);
    EXPECT_EQ(t->ca_path, dir.string());
    EXPECT_EQ(t->variables, "CAIRN_CA_BUNDLE, SSL_CERT_DIR");
    EXPECT_EQ(HttpClientOptions::FromEnvironment().ca_bundle, a);
  }
  {
    ScopedCaEnv env({{"AWS_CA_BUNDLE", b}, {"CURL_CA_BUNDLE", a}});
    EXPECT_EQ(TlsTrustFromEnvironment()->ca_bundle, b);
  }
  {
    ScopedCaEnv env({{"AWS_CA_BUNDLE", (dir / "missing.pem").string()}});
    Result<TlsTrust> t = TlsTrustFromEnvironment();
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(t.status().message().find("AWS_CA_BUNDLE=`" + (dir / "missing.pem").string() + "`: no such file"),
              std::string_view::npos)
        << t.status().ToString();
    EXPECT_TRUE(HttpClientOptions::FromEnvironment().ca_bundle.empty());  // the client keeps the system's
  }
  {
    ScopedCaEnv env({{"TENSORSTORE_CA_PATH", a}});  // a file, not a directory
    Result<TlsTrust> t = TlsTrustFromEnvironment();
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.status().message().find("TENSORSTORE_CA_PATH"), std::string_view::npos);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace cairn::http
