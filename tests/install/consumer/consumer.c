/* Pings 0@lo through the installed C API, found with pkg-config. */
#include <lnet/lnet.h>

#include <stdio.h>

int main(void) {
  struct lnet_process_id me, ids[2];
  int n;

  if (LNetNIInit(LNET_PID_ANY) < 0 || LNetGetId(0, &me) != 0) return 1;
  n = lnet_ping(me, 1000, ids, 2);
  printf("C consumer: ping %s: %d NID(s)\n", libcfs_nid2str(me.nid), n);
  LNetNIFini();
  return n >= 1 ? 0 : 1;
}
