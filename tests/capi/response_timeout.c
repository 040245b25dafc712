/* Response tracking through the classic C API: with LNET_TRANSACTION_TIMEOUT=1 (set by
 * the test's environment), a GET and a PUT with ACK to a portal of ours where nothing
 * matches (the request is dropped, no response is ever sent) complete with a REPLY and an
 * ACK event of status -ETIMEDOUT that unlink their MDs; so does a recovery GET. Exit status 0 on success. */
#include <lnet/lnet.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define PORTAL 30 /* no ME ever attached */

static int fail(const char* what, int rc) {
  fprintf(stderr, "response_timeout: %s: %s\n", what, strerror(rc < 0 ? -rc : rc));
  return 1;
}

/* Waits (up to 30 s: the deadline is 1 s) for the response event of `kind`. */
static int expect_timeout(struct lnet_handle_eq eq, enum lnet_event_kind kind, struct lnet_handle_md mdh) {
  struct lnet_event ev;
  for (int i = 0; i < 4; i++) {
    int rc = LNetEQPoll(&eq, 1, 30000, &ev, NULL);
    if (rc <= 0) return rc == 0 ? -ETIME : rc;
    if (ev.type == LNET_EVENT_SEND) {
      if (ev.status != 0) return ev.status;
      continue;
    }
    if (ev.type != kind || ev.md_handle.cookie != mdh.cookie) return -EPROTO;
    if (ev.status != -ETIMEDOUT) {
      fprintf(stderr, "response_timeout: event %d with status %d, not -ETIMEDOUT\n", ev.type, ev.status);
      return -EPROTO;
    }
    return ev.unlinked ? 0 : -EPROTO;
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
  if ((rc = expect_timeout(eq, LNET_EVENT_REPLY, mdh))) return fail("the GET's REPLY", rc);
  if (LNetMDUnlink(mdh) != -ENOENT) return fail("the timed-out MD is still there", -EPROTO);
  printf("GET: REPLY event -ETIMEDOUT, MD unlinked\n");

  /* A recovery GET (health's kind) is tracked the same way. */
  if ((rc = LNetMDBind(md, LNET_UNLINK, &mdh))) return fail("LNetMDBind", rc);
  if ((rc = LNetGet(LNET_NID_ANY, mdh, me, PORTAL, 1, 0, true))) return fail("LNetGet (recovery)", rc);
  if ((rc = expect_timeout(eq, LNET_EVENT_REPLY, mdh))) return fail("the recovery GET's REPLY", rc);
  printf("recovery GET: REPLY event -ETIMEDOUT, MD unlinked\n");

  if ((rc = LNetMDBind(md, LNET_UNLINK, &mdh))) return fail("LNetMDBind", rc);
  if ((rc = LNetPut(LNET_NID_ANY, mdh, LNET_ACK_REQ, me, PORTAL, 1, 0, 0))) return fail("LNetPut", rc);
  if ((rc = expect_timeout(eq, LNET_EVENT_ACK, mdh))) return fail("the PUT's ACK", rc);
  printf("PUT: ACK event -ETIMEDOUT, MD unlinked\n");

  if ((rc = LNetEQFree(eq))) return fail("LNetEQFree", rc);
  LNetNIFini();
  printf("response_timeout: OK\n");
  return 0;
}
