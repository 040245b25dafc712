// Handle cookies: a cookie finds its object only with its own type and generation.
#include <gtest/gtest.h>

#include "portals/handle_table.hpp"

namespace lnet::portals {
namespace {

TEST(HandleTable, CookieFindsOnlyItsOwnTypeAndGeneration) {
  HandleTable t;
  int me = 0, md = 0;
  std::uint64_t me_cookie = t.insert(&me, HandleType::Me, 3);
  std::uint64_t md_cookie = t.insert(&md, HandleType::Md, 3);
  EXPECT_EQ(t.lookup(me_cookie, HandleType::Me), &me);
  EXPECT_EQ(t.lookup(md_cookie, HandleType::Md), &md);
  EXPECT_EQ(cookie_cpt(me_cookie), 3u);
  EXPECT_EQ(t.lookup(me_cookie, HandleType::Md), nullptr);
  // A forged cookie (say, an ACK's MD handle off the wire): the ME's slot and generation
  // with the MD's type bits. It must not turn the ME into an MD.
  std::uint64_t forged = (me_cookie & ~std::uint64_t{3}) | static_cast<std::uint64_t>(HandleType::Md);
  EXPECT_EQ(t.lookup(forged, HandleType::Md), nullptr);
  // A removed handle's slot is reused with a new generation: the old cookie is stale.
  t.remove(me_cookie);
  EXPECT_EQ(t.lookup(me_cookie, HandleType::Me), nullptr);
  int other = 0;
  std::uint64_t reused = t.insert(&other, HandleType::Me, 3);
  EXPECT_NE(reused, me_cookie);
  EXPECT_EQ(t.lookup(me_cookie, HandleType::Me), nullptr);
  EXPECT_EQ(t.lookup(reused, HandleType::Me), &other);
  EXPECT_EQ(t.lookup(0, HandleType::Md), nullptr);
  EXPECT_EQ(t.lookup(~std::uint64_t{0}, HandleType::Md), nullptr);
}

}  // namespace
}  // namespace lnet::portals
