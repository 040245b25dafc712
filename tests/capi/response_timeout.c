/* Response tracking through the classic C API: with LNET_TRANSACTION_TIMEOUT=1 (set by
 * the test's environment), a GET and a PUT with ACK to a portal of ours where nothing
 * matches (the request is dropped, no response is ever sent) have their MDs unlinked as
 * LNet's LNetMDUnlink does: an LNET_EVENT_UNLINK, the MD's last event, after the SEND;
 * so does a recovery GET; the queue is free to go after it. Exit status 0 on success. */
#include <lnet/lnet.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define PORTAL 30 /* no ME ever attached */

static int fail(const char* what, int rc) {
  fprintf(stderr, "response_timeout: %s: %s\n", what, strerror(rc < 0 ? -rc : rc));
  return 1;
}

/* Waits (up to 30 s each: the deadline is 1 s) for the MD's events: its SEND (status 0,
 * the request went), then, the response never coming, the UNLINK event LNet makes when
 * it unlinks the idle MD (status 0, unlinked); no ACK or REPLY event. */
static int expect_timeout(struct lnet_handle_eq eq, struct lnet_handle_md mdh) {
  struct lnet_event ev;
  int sent = 0;
  for (int i = 0; i < 4; i++) {
    int rc = LNetEQPoll(&eq, 1, 30000, &ev, NULL);
    if (rc <= 0) return rc == 0 ? -ETIME : rc;
    if (ev.md_handle.cookie != mdh.cookie) return -EPROTO;
    if (ev.type == LNET_EVENT_SEND && !sent && ev.status == 0 && !ev.unlinked) {
      sent = 1;
      continue;
    }
    if (ev.type != LNET_EVENT_UNLINK || !sent || ev.status != 0 || !ev.unlinked) {
      fprintf(stderr, "response_timeout: event %d, status %d, unlinked %d: not the SEND then the UNLINK\n", ev.type,
              ev.status, ev.unlinked);
      return -EPROTO;
    }
    return LNetEQGet(eq, &ev) == 0 ? 0 : -EPROTO; /* nothing after it */
  }
  return -EPROTO;
}

int main(void) {
  struct lnet_process_id me;
  struct lnet_handle_eq eq;
  struct lnet_handle_md mdh;
  struct lnet_md md;
  char buf[32] = "request";
  int rc = LNetNIInit(LNET_PID_ANY);

  if (rc < 0) return fail("LNetNIInit", rc);
  if ((rc = LNetGetId(0, &me))) return fail("LNetGetId", rc);
  if ((rc = LNetEQAlloc(16, LNET_EQ_HANDLER_NONE, &eq))) return fail("LNetEQAlloc", rc);
  memset(&md, 0, sizeof(md));
  md.start = buf;
  md.length = sizeof(buf);
  md.threshold = 2;
  md.eq_handle = eq;
  LNetInvalidateMDHandle(&md.bulk_handle);

  if ((rc = LNetMDBind(md, LNET_UNLINK, &mdh))) return fail("LNetMDBind", rc);
  if ((rc = LNetGet(LNET_NID_ANY, mdh, me, PORTAL, 1, 0, false))) return fail("LNetGet", rc);
  if ((rc = expect_timeout(eq, mdh))) return fail("the GET's REPLY", rc);
  if (LNetMDUnlink(mdh) != -ENOENT) return fail("the timed-out MD is still there", -EPROTO);
  printf("GET: no REPLY, MD unlinked (UNLINK event)\n");

  /* A recovery GET (health's kind) is tracked the same way. */
  if ((rc = LNetMDBind(md, LNET_UNLINK, &mdh))) return fail("LNetMDBind", rc);
  if ((rc = LNetGet(LNET_NID_ANY, mdh, me, PORTAL, 1, 0, true))) return fail("LNetGet (recovery)", rc);
  if ((rc = expect_timeout(eq, mdh))) return fail("the recovery GET's REPLY", rc);
  printf("recovery GET: no REPLY, MD unlinked (UNLINK event)\n");

  if ((rc = LNetMDBind(md, LNET_UNLINK, &mdh))) return fail("LNetMDBind", rc);
  if ((rc = LNetPut(LNET_NID_ANY, mdh, LNET_ACK_REQ, me, PORTAL, 1, 0, 0))) return fail("LNetPut", rc);
  if ((rc = expect_timeout(eq, mdh))) return fail("the PUT's ACK", rc);
  printf("PUT: no ACK, MD unlinked (UNLINK event)\n");

  /* The UNLINK was the MD's last event: no MD uses the queue any more. */
  if ((rc = LNetEQFree(eq))) return fail("LNetEQFree after the last event", rc);
  LNetNIFini();
  printf("response_timeout: OK\n");
  return 0;
}
