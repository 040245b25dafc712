/* The C API of the MPI LND (lnet/mpi.h) under mpirun, in a program that asked MPI for no
 * threads (MPI_Init): lnet_mpi_init, lnet_mpi_id, a ping and an acknowledged PUT around the
 * ring of ranks with the classic API (the application drives progress through its
 * LNetEQPoll and lnet_ping waits), lnet_mpi_fini. Any failure aborts the job (exit 1),
 * so no rank is left waiting for another. */
#include <lnet/mpi.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PORTAL 10
#define MATCH_BITS 0xc0deULL

static int rank;

_Noreturn static void fail(const char* what, int rc) {
  fprintf(stderr, "[rank %d] mpi_capi_test: %s: %d (%s)\n", rank, what, rc, strerror(rc < 0 ? -rc : rc));
  MPI_Abort(MPI_COMM_WORLD, 1);
  exit(1); /* MPI_Abort does not return; the compiler cannot know */
}

/* A barrier that keeps LNet going (polling an EQ without MDs) so that ranks still
 * waiting for us are served. */
static void sync_all(struct lnet_handle_eq idle) {
  MPI_Request r;
  struct lnet_event ev;
  int done = 0;

  if (MPI_Ibarrier(MPI_COMM_WORLD, &r) != MPI_SUCCESS) fail("MPI_Ibarrier", -EIO);
  while (!done) {
    LNetEQPoll(&idle, 1, 0, &ev, NULL);
    MPI_Test(&r, &done, MPI_STATUS_IGNORE);
  }
}

int main(int argc, char** argv) {
  struct lnet_process_id any = {LNET_NID_ANY, LNET_PID_ANY}, me, next, ids[4];
  struct lnet_handle_eq eq, idle;
  struct lnet_handle_me meh;
  struct lnet_handle_md target_md, src_md;
  struct lnet_md md;
  struct lnet_event ev;
  char target[64] = "", source[64];
  int size, rc, n, i, seen_send = 0, seen_ack = 0, seen_put = 0;

  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  if (lnet_mpi_id(0).nid != LNET_NID_ANY) fail("lnet_mpi_id before lnet_mpi_init is not LNET_NID_ANY", -EPROTO);
  rc = lnet_mpi_init(MPI_COMM_WORLD);
  if (rc) fail("lnet_mpi_init", rc);
  me = lnet_mpi_id(rank);
  next = lnet_mpi_id((rank + 1) % size);
  /* NI 0 is 0@lo, NI 1 the MPI one: <rank>@mpi. */
  if (LNetGetId(1, &ids[0]) || ids[0].nid != me.nid || ids[0].pid != me.pid)
    fail("LNetGetId(1) is not lnet_mpi_id(rank)", -EPROTO);
  if (next.pid != me.pid) fail("ranks with different pids", -EPROTO);

  if ((rc = LNetEQAlloc(16, LNET_EQ_HANDLER_NONE, &eq)) || (rc = LNetEQAlloc(1, LNET_EQ_HANDLER_NONE, &idle)))
    fail("LNetEQAlloc", rc);
  rc = LNetMEAttach(PORTAL, any, MATCH_BITS, 0, LNET_UNLINK, LNET_INS_AFTER, &meh);
  if (rc) fail("LNetMEAttach", rc);
  memset(&md, 0, sizeof(md));
  md.start = target;
  md.length = sizeof(target);
  md.threshold = 1;
  md.options = LNET_MD_OP_PUT;
  md.eq_handle = eq;
  LNetInvalidateMDHandle(&md.bulk_handle);
  rc = LNetMDAttach(meh, md, LNET_UNLINK, &target_md);
  if (rc) fail("LNetMDAttach", rc);
  sync_all(idle);

  n = lnet_ping(next, 20000, ids, 4);
  if (n < 2 || ids[1].nid != next.nid) fail("ping of the next rank", n < 0 ? n : -EPROTO);

  snprintf(source, sizeof(source), "from rank %d", rank);
  md.start = source;
  md.length = (unsigned int)strlen(source) + 1;
  md.threshold = 2;
  md.options = 0;
  rc = LNetMDBind(md, LNET_UNLINK, &src_md);
  if (rc) fail("LNetMDBind", rc);
  rc = LNetPut(LNET_NID_ANY, src_md, LNET_ACK_REQ, next, PORTAL, MATCH_BITS, 0, (__u64)rank);
  if (rc) fail("LNetPut", rc);
  /* Our SEND and ACK, and the PUT of the rank before us. */
  for (i = 0; i < 3; i++) {
    rc = LNetEQPoll(&eq, 1, 20000, &ev, NULL);
    if (rc <= 0) fail("waiting for events", rc == 0 ? -ETIMEDOUT : rc);
    if (ev.status) fail("event status", ev.status);
    seen_send += ev.type == LNET_EVENT_SEND;
    seen_ack += ev.type == LNET_EVENT_ACK;
    seen_put += ev.type == LNET_EVENT_PUT && ev.hdr_data == (__u64)((rank + size - 1) % size);
  }
  snprintf(source, sizeof(source), "from rank %d", (rank + size - 1) % size);
  if (seen_send != 1 || seen_ack != 1 || seen_put != 1 || strcmp(target, source) != 0)
    fail("the PUT around the ring", -EPROTO);
  sync_all(idle);

  rc = lnet_mpi_fini();
  if (rc) fail("lnet_mpi_fini", rc);
  if (rank == 0) printf("mpi_capi_test: %d ranks pinged and PUT around the ring over the C API\n", size);
  MPI_Finalize();
  return 0;
}
