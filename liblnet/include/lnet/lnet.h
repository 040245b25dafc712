/* The classic LNet C API (userspace-era names, argument order, structs and constants),
 * so code written for it compiles unchanged. One LNet instance per process, configured
 * from the LNET_* environment variables (see lnet(3), `--env` of the tools). */
#ifndef LNET_LNET_H
#define LNET_LNET_H

#include <linux/types.h>
#include <stdbool.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef __u64 lnet_nid_t;
typedef __u32 lnet_pid_t;

#define LNET_NID_ANY ((lnet_nid_t)-1)
#define LNET_PID_ANY ((lnet_pid_t)-1)
#define LNET_PID_LUSTRE 12345
#define LNET_PID_USERFLAG 0x80000000U
#define LNET_PID_RESERVED 0xf0000000U

#define LNET_NIDADDR(nid) ((__u32)((nid)&0xffffffff))
#define LNET_NIDNET(nid) ((__u32)(((nid) >> 32)) & 0xffffffff)
#define LNET_MKNID(net, addr) ((((__u64)(net)) << 32) | ((__u64)(addr)))
#define LNET_NETNUM(net) ((net)&0xffff)
#define LNET_NETTYP(net) (((net) >> 16) & 0xff)
#define LNET_MKNET(typ, num) ((((__u32)(typ)) << 16) | ((__u32)(num)))
#define LNET_NET_ANY LNET_NIDNET(LNET_NID_ANY)

/* LND (network) types; MPILND is this project's private number. */
enum {
  SOCKLND = 2,
  O2IBLND = 5,
  LOLND = 9,
  GNILND = 13,
  GNIIPLND = 14,
  PTL4LND = 15,
  KFILND = 16,
  EFALND = 18,
  BXI3LND = 19,
  MPILND = 64
};

#define LNET_NID_LO_0 LNET_MKNID(LNET_MKNET(LOLND, 0), 0)
#define LNET_WIRE_HANDLE_COOKIE_NONE (-1)
#define LNET_MTU_BITS 20
#define LNET_MTU (1 << LNET_MTU_BITS)
#define LNET_MAX_PAYLOAD LNET_MTU
#define LNET_MAX_IOV 256
#define LNET_RESERVED_PORTAL 0
#define LNET_PROTO_PING_MATCHBITS 0x8000000000000000ULL

struct lnet_handle_eq {
  __u64 cookie;
};
struct lnet_handle_md {
  __u64 cookie;
};
struct lnet_handle_me {
  __u64 cookie;
};

static inline void LNetInvalidateEQHandle(struct lnet_handle_eq* h) { h->cookie = ~0ULL; }
static inline int LNetEQHandleIsInvalid(struct lnet_handle_eq h) { return h.cookie == ~0ULL; }
static inline void LNetInvalidateMDHandle(struct lnet_handle_md* h) { h->cookie = ~0ULL; }
static inline int LNetMDHandleIsInvalid(struct lnet_handle_md h) { return h.cookie == ~0ULL; }
static inline void LNetInvalidateMEHandle(struct lnet_handle_me* h) { h->cookie = ~0ULL; }
static inline int LNetMEHandleIsInvalid(struct lnet_handle_me h) { return h.cookie == ~0ULL; }

struct lnet_process_id {
  lnet_nid_t nid;
  lnet_pid_t pid;
};

enum lnet_unlink { LNET_RETAIN = 0, LNET_UNLINK };
enum lnet_ins_pos { LNET_INS_BEFORE, LNET_INS_AFTER, LNET_INS_LOCAL };
enum lnet_ack_req { LNET_ACK_REQ, LNET_NOACK_REQ };
enum lnet_msg_type { LNET_MSG_ACK = 0, LNET_MSG_PUT, LNET_MSG_GET, LNET_MSG_REPLY, LNET_MSG_HELLO };

struct lnet_md {
  void* start;         /* buffer, or a struct iovec array with LNET_MD_IOVEC */
  unsigned int length; /* bytes, or the number of iovecs with LNET_MD_IOVEC */
  int threshold;       /* operations left; LNET_MD_THRESH_INF: never exhausted */
  int max_size;        /* with LNET_MD_MAX_SIZE */
  unsigned int options;
  void* user_ptr;
  struct lnet_handle_eq eq_handle;
  struct lnet_handle_md bulk_handle;
};

#define LNET_MD_THRESH_INF (-1)
#define LNET_MD_OP_PUT (1 << 0)
#define LNET_MD_OP_GET (1 << 1)
#define LNET_MD_MANAGE_REMOTE (1 << 2)
#define LNET_MD_TRUNCATE (1 << 4)
#define LNET_MD_ACK_DISABLE (1 << 5)
#define LNET_MD_IOVEC (1 << 6)
#define LNET_MD_MAX_SIZE (1 << 7)
#define LNET_MD_KIOV (1 << 8)
#define LNET_MD_BULK_HANDLE (1 << 9)

enum lnet_event_kind {
  LNET_EVENT_GET = 1,
  LNET_EVENT_PUT,
  LNET_EVENT_REPLY,
  LNET_EVENT_ACK,
  LNET_EVENT_SEND,
  LNET_EVENT_UNLINK,
};

struct lnet_event {
  struct lnet_process_id target;
  struct lnet_process_id initiator;
  struct lnet_process_id source;
  lnet_nid_t sender;
  enum lnet_event_kind type;
  unsigned int pt_index;
  __u64 match_bits;
  unsigned int rlength;
  unsigned int mlength;
  struct lnet_handle_md md_handle;
  struct lnet_md md; /* the MD as it is after the operation */
  __u64 hdr_data;
  __u32 msg_type;
  int status;
  int unlinked;
  unsigned int offset;
  volatile unsigned long sequence;
};

typedef void (*lnet_eq_handler_t)(struct lnet_event* event);
#define LNET_EQ_HANDLER_NONE ((lnet_eq_handler_t)0)

/* Names of the pre-2.11 typedef era, for old code. */
typedef struct lnet_process_id lnet_process_id_t;
typedef struct lnet_handle_eq lnet_handle_eq_t;
typedef struct lnet_handle_md lnet_handle_md_t;
typedef struct lnet_handle_me lnet_handle_me_t;
typedef struct lnet_md lnet_md_t;
typedef struct lnet_event lnet_event_t;
typedef enum lnet_event_kind lnet_event_kind_t;
typedef enum lnet_unlink lnet_unlink_t;
typedef enum lnet_ins_pos lnet_ins_pos_t;
typedef enum lnet_ack_req lnet_ack_req_t;

/* All return 0 or a negative errno unless said otherwise. */
int LNetNIInit(lnet_pid_t requested_pid); /* > 0: already up, the previous use count */
int LNetNIFini(void);
int LNetGetId(unsigned int index, struct lnet_process_id* id);  /* -ENOENT past the last NI */
int LNetDist(lnet_nid_t nid, lnet_nid_t* srcnid, __u32* order); /* >= 0: distance */

int LNetMEAttach(unsigned int portal, struct lnet_process_id match_id_in, __u64 match_bits_in, __u64 ignore_bits_in,
                 enum lnet_unlink unlink_in, enum lnet_ins_pos pos_in, struct lnet_handle_me* handle_out);
int LNetMEInsert(struct lnet_handle_me current_in, struct lnet_process_id match_id_in, __u64 match_bits_in,
                 __u64 ignore_bits_in, enum lnet_unlink unlink_in, enum lnet_ins_pos position_in,
                 struct lnet_handle_me* handle_out);
int LNetMEUnlink(struct lnet_handle_me current_in);

int LNetMDAttach(struct lnet_handle_me current_in, struct lnet_md md_in, enum lnet_unlink unlink_in,
                 struct lnet_handle_md* md_handle_out);
int LNetMDBind(struct lnet_md md_in, enum lnet_unlink unlink_in, struct lnet_handle_md* md_handle_out);
int LNetMDUnlink(struct lnet_handle_md md_in);

int LNetEQAlloc(unsigned int count_in, lnet_eq_handler_t handler, struct lnet_handle_eq* handle_out);
int LNetEQFree(struct lnet_handle_eq eventq_in); /* -EBUSY while an MD uses it */
/* 1: got an event, 0: none, -EOVERFLOW: got one but earlier events were lost. */
int LNetEQGet(struct lnet_handle_eq eventq_in, struct lnet_event* event_out);
int LNetEQWait(struct lnet_handle_eq eventq_in, struct lnet_event* event_out);
/* timeout in milliseconds; 0 polls, LONG_MAX or a negative value waits forever. */
int LNetEQPoll(struct lnet_handle_eq* eventqs_in, int neq_in, signed long timeout, struct lnet_event* event_out,
               int* which_eq_out);

int LNetPut(lnet_nid_t self, struct lnet_handle_md md_in, enum lnet_ack_req ack_req_in,
            struct lnet_process_id target_in, unsigned int portal_in, __u64 match_bits_in, unsigned int offset_in,
            __u64 hdr_data_in);
/* recovery: sent as health's recovery pings are, to exactly target's NID and never resent. */
int LNetGet(lnet_nid_t self, struct lnet_handle_md md_in, struct lnet_process_id target_in, unsigned int portal_in,
            __u64 match_bits_in, unsigned int offset_in, bool recovery);

int LNetSetLazyPortal(int portal);
int LNetClearLazyPortal(int portal);

/* Identifier text (as libcfs prints it). The returned strings live in a small rotating
 * per-thread buffer: copy them if you keep them. */
char* libcfs_nid2str(lnet_nid_t nid);
char* libcfs_net2str(__u32 net);
char* libcfs_id2str(struct lnet_process_id id);
lnet_nid_t libcfs_str2nid(const char* str); /* LNET_NID_ANY on error */
__u32 libcfs_str2net(const char* str);      /* LNET_NET_ANY on error */

/* Extension: pings `target` (pid LNET_PID_ANY = 12345), waits up to timeout_ms, stores at
 * most n_ids of its NIDs (0@lo first) in ids_out. Returns the number of NIDs it has. */
int lnet_ping(struct lnet_process_id target, int timeout_ms, struct lnet_process_id* ids_out, int n_ids);

/* Extensions: the running instance's NIs and routes, as lnetctl sets a node's (after
 * LNetNIInit; 0 or a negative errno, the cause logged).
 * lnet_add_ni: an NI with exactly the NID `nid` (its network from the NID) on the
 * interface `interface`, or, NULL, on the interface that has the NID's address (tcp);
 * -EEXIST when the NID is ours already, -EPROTONOSUPPORT when no driver serves its
 * network type. lnet_del_ni takes it down (what waits for it fails).
 * lnet_add_route: messages for `net` go through `gateway` (a NID on a network of ours);
 * hops -1 (undefined) or 1..255, priority 0 best. lnet_del_route: gateway LNET_NID_ANY
 * removes every route to `net`. */
int lnet_add_ni(lnet_nid_t nid, const char* interface);
int lnet_del_ni(lnet_nid_t nid);
int lnet_add_route(__u32 net, lnet_nid_t gateway, int hops, unsigned int priority);
int lnet_del_route(__u32 net, lnet_nid_t gateway);

#ifdef __cplusplus
}
#endif

#endif /* LNET_LNET_H */
