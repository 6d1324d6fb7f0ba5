// Profiles of the AWS shared files (aws_profile.h) resolved into recipes,
// without requests: the AWS CLI's order (role, credentials-file keys,
// process, config-file keys), roles chained through source_profile, a
// profile that is its own source, and the refusals (cycles, chains too
// deep, credential_source, bad durations, a source without credentials).
#include "cairn/kvstore/s3/aws_profile.h"

#include <gtest/gtest.h>

namespace cairn::s3 {
namespace {

AwsSharedFiles Files(std::string credentials, std::string config) {
  AwsSharedFiles f;
  f.credentials_path = "/c";
  f.config_path = "/k";
  f.credentials_text = std::move(credentials);
  f.config_text = std::move(config);
  return f;
}

using Kind = AwsProfileRecipe::Kind;

TEST(AwsProfileTest, TheAwsCliOrder) {
  AwsSharedFiles f = Files("[both]\naws_access_key_id = FILE\naws_secret_access_key = s\n",
                           "[profile both]\nrole_arn = arn:r\nsource_profile = base\ncredential_process = p\n"
                           "[profile base]\naws_access_key_id = BASE\naws_secret_access_key = s\n"
                           "[profile proc]\ncredential_process = run-me\naws_access_key_id = CONF\n"
                           "aws_secret_access_key = s\n");
  Result<AwsProfileRecipe> r = ResolveAwsProfile(f, "both", true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->kind, Kind::kAssumeRole);  // the role comes before the keys
  EXPECT_EQ(r->role_arn, "arn:r");
  EXPECT_EQ(r->where, "/k [both]");
  ASSERT_TRUE(r->source);
  EXPECT_EQ(r->source->kind, Kind::kKeys);
  EXPECT_EQ(r->source->keys.access_key_id, "BASE");

  r = ResolveAwsProfile(f, "proc", true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kind, Kind::kProcess);  // the process comes before the config file's keys
  EXPECT_EQ(r->process, "run-me");

  r = ResolveAwsProfile(f, "missing", false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->kind, Kind::kNone);
  r = ResolveAwsProfile(f, "missing", true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("`missing` is in neither the credentials file /c nor the config file /k"),
            std::string_view::npos)
      << r.status().ToString();
}

TEST(AwsProfileTest, RolesChainAndMayUseTheirOwnKeys) {
  AwsSharedFiles f = Files("[self]\naws_access_key_id = SELF\naws_secret_access_key = s\n",
                           "[profile self]\nrole_arn = arn:self\nsource_profile = self\n"
                           "[profile a]\nrole_arn = arn:a\nsource_profile = self\nexternal_id = x\n"
                           "duration_seconds = 1800\nrole_session_name = n\n"
                           "[profile b]\nrole_arn = arn:b\nsource_profile = a\n");
  Result<AwsProfileRecipe> r = ResolveAwsProfile(f, "b", true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->kind, Kind::kAssumeRole);
  ASSERT_EQ(r->source->kind, Kind::kAssumeRole);
  EXPECT_EQ(r->source->role_arn, "arn:a");
  EXPECT_EQ(r->source->external_id, "x");
  EXPECT_EQ(r->source->duration_seconds, 1800u);
  EXPECT_EQ(r->source->session_name, "n");
  ASSERT_EQ(r->source->source->kind, Kind::kAssumeRole);  // `self`: a role signed by its own keys
  EXPECT_EQ(r->source->source->source->kind, Kind::kKeys);
  EXPECT_EQ(r->source->source->source->keys.access_key_id, "SELF");
  // Recipes that make the same requests share a cache key; others do not.
  Result<AwsProfileRecipe> again = ResolveAwsProfile(f, "b", true);
  EXPECT_EQ(again->CacheKey(), r->CacheKey());
  EXPECT_NE(ResolveAwsProfile(f, "a", true)->CacheKey(), r->CacheKey());
}

TEST(AwsProfileTest, RefusalsNameTheProfile) {
  std::string config =
      "[profile loop1]\nrole_arn = r\nsource_profile = loop2\n"
      "[profile loop2]\nrole_arn = r\nsource_profile = loop1\n"
      "[profile ec2]\nrole_arn = r\ncredential_source = Ec2InstanceMetadata\n"
      "[profile nosource]\nrole_arn = r\n"
      "[profile short]\nrole_arn = r\nsource_profile = keys\nduration_seconds = 60\n"
      "[profile keys]\naws_access_key_id = K\naws_secret_access_key = s\n"
      "[profile empty]\nregion = us-east-1\n"
      "[profile toempty]\nrole_arn = r\nsource_profile = empty\n"
      "[profile selfnokeys]\nrole_arn = r\nsource_profile = selfnokeys\n";
  for (int i = 1; i <= 6; ++i) {  // d1 -> d2 -> ... -> d6 -> keys
    config += "[profile d" + std::to_string(i) + "]\nrole_arn = r\nsource_profile = " +
              (i == 6 ? std::string("keys") : "d" + std::to_string(i + 1)) + "\n";
  }
  AwsSharedFiles f = Files("", config);
  struct Case {
    const char* profile;
    const char* message;
  } cases[] = {
      {"loop1", "/k [loop2]: source_profile makes a cycle (loop1 -> loop2 -> loop1)"},
      {"ec2", "/k [ec2]: credential_source is not supported"},
      {"nosource", "/k [nosource]: role_arn without source_profile"},
      {"short", "/k [short]: duration_seconds `60` is not a number of seconds from 900 to 43200"},
      {"toempty", "/k [toempty]: source_profile `empty` has no credentials"},
      {"selfnokeys", "source_profile is the profile itself, which has no keys"},
      {"d1", "roles chained by source_profile"},
  };
  for (const Case& c : cases) {
    Result<AwsProfileRecipe> r = ResolveAwsProfile(f, c.profile, true);
    ASSERT_FALSE(r.ok()) << c.profile;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.profile;
    EXPECT_NE(r.status().message().find(c.message), std::string_view::npos) << r.status().ToString();
  }
  EXPECT_TRUE(ResolveAwsProfile(f, "d3", true).ok());  // 4 roles deep: allowed
  EXPECT_FALSE(ResolveAwsProfile(f, "d2", true).ok());  // 5: refused
}

}  // namespace
}  // namespace cairn::s3
