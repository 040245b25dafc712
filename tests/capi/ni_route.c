/* The C API's NI and route calls (lnet_add_ni, lnet_del_ni, lnet_add_route,
 * lnet_del_route) on a process with no networks configured: an NI with an explicit NID
 * on an interface appears among LNetGetId's, a route through it is taken, bad arguments
 * are refused with the errno lnet(3) names, and everything goes again. The test's
 * environment sets LNET_ACCEPT_PORT (no privileged port, no clash). Exit 0 on success. */
#include <lnet/lnet.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

static int fail(const char* what, int rc) {
  fprintf(stderr, "ni_route: %s: %d (%s)\n", what, rc, strerror(rc < 0 ? -rc : rc));
  return 1;
}

#define EXPECT(what, call, want)               \
  do {                                         \
    int rc_ = (call);                          \
    if (rc_ != (want)) return fail(what, rc_); \
  } while (0)

int main(void) {
  lnet_nid_t nid = libcfs_str2nid("127.0.0.77@tcp");
  lnet_nid_t gw = libcfs_str2nid("127.0.0.99@tcp");
  __u32 far = libcfs_str2net("tcp5");
  struct lnet_process_id id;

  EXPECT("lnet_add_ni before LNetNIInit", lnet_add_ni(nid, "lo"), -ENETDOWN);
  if (LNetNIInit(LNET_PID_ANY) < 0) return fail("LNetNIInit", -EIO);
  EXPECT("LNetGetId(1) with loopback only", LNetGetId(1, &id), -ENOENT);

  EXPECT("lnet_add_ni", lnet_add_ni(nid, "lo"), 0);
  EXPECT("LNetGetId(1)", LNetGetId(1, &id), 0);
  if (id.nid != nid) return fail("the new NI's NID", -EPROTO);
  EXPECT("lnet_add_ni of a NID we have", lnet_add_ni(nid, "lo"), -EEXIST);
  if (lnet_add_ni(libcfs_str2nid("127.0.0.78@tcp"), "nosuchif0") >= 0) return fail("an unknown interface", 0);
  EXPECT("lnet_add_ni(LNET_NID_ANY)", lnet_add_ni(LNET_NID_ANY, NULL), -EINVAL);

  EXPECT("lnet_add_route", lnet_add_route(far, gw, -1, 0), 0);
  EXPECT("lnet_add_route with 0 hops", lnet_add_route(libcfs_str2net("tcp6"), gw, 0, 0), -EINVAL);
  if (lnet_add_route(libcfs_str2net("tcp6"), libcfs_str2nid("10.0.0.1@tcp9"), -1, 0) >= 0)
    return fail("a gateway on no network of ours", 0);
  if (LNetDist(libcfs_str2nid("10.1.1.1@tcp5"), NULL, NULL) < 1) return fail("LNetDist through the route", -EPROTO);
  EXPECT("lnet_del_route", lnet_del_route(far, LNET_NID_ANY), 0);
  if (LNetDist(libcfs_str2nid("10.1.1.1@tcp5"), NULL, NULL) >= 0) return fail("the route is still there", -EPROTO);

  EXPECT("lnet_del_ni", lnet_del_ni(nid), 0);
  EXPECT("LNetGetId(1) after lnet_del_ni", LNetGetId(1, &id), -ENOENT);
  LNetNIFini();
  EXPECT("lnet_add_route after LNetNIFini", lnet_add_route(far, gw, -1, 0), -ENETDOWN);
  printf("ni_route: OK\n");
  return 0;
}
