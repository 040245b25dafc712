/* Example 04: a client in C of a server that follows lnet-xfer's contract (lnet(3),
 * SERVING A PORTAL: pid 12345, portal 40, any match bits, offsets named by the client),
 * written from the man pages alone. It brings up an NI with an explicit NID on an
 * interface (lnet_add_ni), a route if asked (lnet_add_route), pings the server, PUTs a
 * buffer to it with an ACK and GETs it back, every byte compared.
 *
 *   xfer_client LOCAL_NID INTERFACE SERVER_NID [NET GATEWAY_NID] [BYTES]
 *
 * Exit status 0 on success. */
#include <lnet/lnet.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SERVER_PORTAL 40

static int fail(const char* what, int rc) {
  fprintf(stderr, "xfer_client: %s: %s\n", what, strerror(rc < 0 ? -rc : rc));
  return 1;
}

/* One PUT (with ACK) or GET of `len` bytes at `buf`, waited for to the MD's last event
 * (the one with `unlinked`). It succeeded if its ACK or REPLY came with status 0 and the
 * full length; an MD that ends without one (a failed SEND, or an UNLINK: no response
 * within LNet's transaction_timeout) failed. */
static int transfer(struct lnet_handle_eq eq, int put, char* buf, unsigned int len, struct lnet_process_id server) {
  struct lnet_handle_md mdh;
  struct lnet_event ev;
  struct lnet_md md;
  int rc, answered = 0, status = 0;

  memset(&md, 0, sizeof(md));
  md.start = buf;
  md.length = len;
  md.threshold = 2; /* SEND, then ACK or REPLY */
  md.eq_handle = eq;
  LNetInvalidateMDHandle(&md.bulk_handle);
  if ((rc = LNetMDBind(md, LNET_UNLINK, &mdh))) return rc;
  rc = put ? LNetPut(LNET_NID_ANY, mdh, LNET_ACK_REQ, server, SERVER_PORTAL, 0, 0, 0)
           : LNetGet(LNET_NID_ANY, mdh, server, SERVER_PORTAL, 0, 0, false);
  if (rc) {
    LNetMDUnlink(mdh);
    return rc;
  }
  do {
    if ((rc = LNetEQWait(eq, &ev)) < 0) return rc;
    if (ev.type == LNET_EVENT_ACK || ev.type == LNET_EVENT_REPLY) {
      answered = ev.status == 0 && ev.mlength == len;
      if (ev.status) status = ev.status;
    } else if (ev.status && !status) {
      status = ev.status;
    }
  } while (!ev.unlinked);
  if (answered) return 0;
  return status ? status : -ETIMEDOUT;
}

int main(int argc, char** argv) {
  struct lnet_process_id server = {0, LNET_PID_LUSTRE}, nids[8];
  struct lnet_handle_eq eq;
  unsigned int len = argc == 5 || argc == 7 ? (unsigned int)strtoul(argv[argc - 1], NULL, 0) : 65536;
  char *out, *back;
  lnet_nid_t me;
  int rc, n;

  if (argc < 4 || argc > 7 || len == 0 || len > LNET_MTU) {
    fprintf(stderr, "usage: xfer_client LOCAL_NID INTERFACE SERVER_NID [NET GATEWAY_NID] [BYTES]\n");
    return 2;
  }
  me = libcfs_str2nid(argv[1]);
  server.nid = libcfs_str2nid(argv[3]);
  if (me == LNET_NID_ANY || server.nid == LNET_NID_ANY) return fail("a NID", -EINVAL);
  if ((rc = LNetNIInit(LNET_PID_LUSTRE)) < 0) return fail("LNetNIInit", rc);
  if ((rc = lnet_add_ni(me, argv[2]))) return fail("lnet_add_ni", rc);
  if (argc >= 6 && (rc = lnet_add_route(libcfs_str2net(argv[4]), libcfs_str2nid(argv[5]), -1, 0)))
    return fail("lnet_add_route", rc);

  if ((n = lnet_ping(server, 10000, nids, 8)) < 0) return fail("lnet_ping", n);
  printf("ping %s: %d NIDs\n", libcfs_id2str(server), n);

  out = malloc(len);
  back = malloc(len);
  if (!out || !back) return fail("malloc", -ENOMEM);
  for (unsigned int i = 0; i < len; i++) out[i] = (char)(i * 7 + 3);
  memset(back, 0, len);
  if ((rc = LNetEQAlloc(8, LNET_EQ_HANDLER_NONE, &eq))) return fail("LNetEQAlloc", rc);
  if ((rc = transfer(eq, 1, out, len, server))) return fail("PUT", rc);
  if ((rc = transfer(eq, 0, back, len, server))) return fail("GET", rc);
  if (memcmp(out, back, len)) return fail("the data read back", -EIO);
  printf("PUT and GET of %u bytes from %s: ok (data checked)\n", len, libcfs_nid2str(me));

  if ((rc = LNetEQFree(eq))) return fail("LNetEQFree", rc);
  if (argc >= 6 && (rc = lnet_del_route(libcfs_str2net(argv[4]), LNET_NID_ANY))) return fail("lnet_del_route", rc);
  if ((rc = lnet_del_ni(me))) return fail("lnet_del_ni", rc);
  free(out);
  free(back);
  LNetNIFini();
  return 0;
}
