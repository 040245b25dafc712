/* Example 00: the classic C API over 0@lo. Pings itself, PUTs a buffer to a match
 * entry on portal 10 and GETs it back, checking every event. Exit status 0 on success. */
#include <lnet/lnet.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define PORTAL 10
#define MATCH_BITS 0x1234ULL

static int fail(const char* what, int rc) {
  fprintf(stderr, "loopback: %s failed: %s\n", what, strerror(rc < 0 ? -rc : rc));
  return 1;
}

/* Waits for one event of the expected kind and checks its status. */
static int expect(struct lnet_handle_eq eq, enum lnet_event_kind kind, struct lnet_event* ev) {
  int rc = LNetEQPoll(&eq, 1, 1000, ev, NULL);

  if (rc <= 0) return rc == 0 ? -ETIMEDOUT : rc;
  if (ev->type != kind || ev->status != 0) {
    fprintf(stderr, "loopback: expected event %d, got %d with status %d\n", kind, ev->type, ev->status);
    return -EPROTO;
  }
  return 0;
}

/* The target: an ME for our match bits with an MD that takes PUT and GET. */
static int attach_target(struct lnet_handle_eq eq, char* buf, unsigned int len, struct lnet_handle_md* out) {
  struct lnet_process_id any = {LNET_NID_ANY, LNET_PID_ANY};
  struct lnet_handle_me meh;
  struct lnet_md md;
  int rc = LNetMEAttach(PORTAL, any, MATCH_BITS, 0, LNET_UNLINK, LNET_INS_AFTER, &meh);

  if (rc) return fail("LNetMEAttach", rc);
  memset(&md, 0, sizeof(md));
  md.start = buf;
  md.length = len;
  md.threshold = LNET_MD_THRESH_INF;
  md.options = LNET_MD_OP_PUT | LNET_MD_OP_GET | LNET_MD_MANAGE_REMOTE;
  md.eq_handle = eq;
  LNetInvalidateMDHandle(&md.bulk_handle);
  rc = LNetMDAttach(meh, md, LNET_RETAIN, out);
  return rc ? fail("LNetMDAttach", rc) : 0;
}

/* A free-floating MD over buf for one PUT or GET (two events: SEND and ACK/REPLY). */
static int bind_buffer(struct lnet_handle_eq eq, char* buf, unsigned int len, struct lnet_handle_md* out) {
  struct lnet_md md;
  int rc;

  memset(&md, 0, sizeof(md));
  md.start = buf;
  md.length = len;
  md.threshold = 2;
  md.eq_handle = eq;
  LNetInvalidateMDHandle(&md.bulk_handle);
  rc = LNetMDBind(md, LNET_UNLINK, out);
  return rc ? fail("LNetMDBind", rc) : 0;
}

/* PUT with an ACK: SEND, PUT (at the target) and ACK events. */
static int put_and_check(struct lnet_handle_eq eq, struct lnet_process_id me, char* source, const char* target) {
  struct lnet_handle_md src_md;
  struct lnet_event ev;
  unsigned int len = (unsigned int)strlen(source) + 1;
  int rc, seen_put = 0, seen_send = 0, seen_ack = 0;

  if (bind_buffer(eq, source, len, &src_md)) return 1;
  rc = LNetPut(LNET_NID_ANY, src_md, LNET_ACK_REQ, me, PORTAL, MATCH_BITS, 0, 42);
  if (rc) return fail("LNetPut", rc);
  for (int i = 0; i < 3; i++) {
    rc = LNetEQPoll(&eq, 1, 1000, &ev, NULL);
    if (rc <= 0) return fail("waiting for PUT events", rc == 0 ? -ETIMEDOUT : rc);
    if (ev.status) return fail("PUT event", ev.status);
    seen_put += ev.type == LNET_EVENT_PUT && ev.hdr_data == 42 && ev.mlength == len;
    seen_send += ev.type == LNET_EVENT_SEND;
    seen_ack += ev.type == LNET_EVENT_ACK && ev.unlinked;
  }
  if (!seen_put || !seen_send || !seen_ack || strcmp(target, source) != 0) return fail("PUT", -EPROTO);
  printf("PUT %u bytes to portal %d: SEND, PUT and ACK seen, data \"%s\"\n", len, PORTAL, target);
  return 0;
}

/* GET it back: SEND, GET (at the target) and REPLY events. */
static int get_and_check(struct lnet_handle_eq eq, struct lnet_process_id me, const char* source) {
  struct lnet_handle_md sink_md;
  struct lnet_event ev;
  char sink[64] = "";
  int rc, seen_get = 0, seen_send = 0, seen_reply = 0;

  if (bind_buffer(eq, sink, sizeof(sink), &sink_md)) return 1;
  rc = LNetGet(LNET_NID_ANY, sink_md, me, PORTAL, MATCH_BITS, 0, false);
  if (rc) return fail("LNetGet", rc);
  for (int i = 0; i < 3; i++) {
    rc = LNetEQPoll(&eq, 1, 1000, &ev, NULL);
    if (rc <= 0) return fail("waiting for GET events", rc == 0 ? -ETIMEDOUT : rc);
    if (ev.status) return fail("GET event", ev.status);
    seen_get += ev.type == LNET_EVENT_GET;
    seen_send += ev.type == LNET_EVENT_SEND;
    seen_reply += ev.type == LNET_EVENT_REPLY && ev.unlinked;
  }
  if (!seen_get || !seen_send || !seen_reply || strcmp(sink, source) != 0) return fail("GET", -EPROTO);
  printf("GET %zu bytes back: SEND, GET and REPLY seen, data \"%s\"\n", sizeof(sink), sink);
  return 0;
}

int main(void) {
  struct lnet_process_id me, ids[4];
  struct lnet_handle_eq eq;
  struct lnet_handle_md target_md;
  struct lnet_event ev;
  char target[64] = "", source[64] = "hello over 0@lo";
  int rc, n;

  rc = LNetNIInit(LNET_PID_ANY);
  if (rc < 0) return fail("LNetNIInit", rc);
  rc = LNetGetId(0, &me);
  if (rc) return fail("LNetGetId", rc);
  printf("initialised as %s\n", libcfs_id2str(me));

  n = lnet_ping(me, 1000, ids, 4);
  if (n < 1) return fail("ping", n);
  printf("ping %s: %d NID(s), first %s\n", libcfs_nid2str(me.nid), n, libcfs_nid2str(ids[0].nid));

  rc = LNetEQAlloc(16, LNET_EQ_HANDLER_NONE, &eq);
  if (rc) return fail("LNetEQAlloc", rc);
  if (attach_target(eq, target, sizeof(target), &target_md)) return 1;
  if (put_and_check(eq, me, source, target)) return 1;
  if (get_and_check(eq, me, source)) return 1;

  rc = LNetMDUnlink(target_md);
  if (rc) return fail("LNetMDUnlink", rc);
  rc = expect(eq, LNET_EVENT_UNLINK, &ev);
  if (rc) return fail("UNLINK event", rc);
  rc = LNetEQFree(eq);
  if (rc) return fail("LNetEQFree", rc);
  LNetNIFini();
  printf("loopback example: OK\n");
  return 0;
}
