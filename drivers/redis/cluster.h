/* cluster.h — Redis Cluster routing for the Redis driver (Debian's hiredis
 * 0.14 has none): slot map, one connection per node per pooled connection,
 * MOVED/ASK/TRYAGAIN followed, WAIT for replicas. See docs/redis.md. */
#ifndef CONVO_REDIS_CLUSTER_H
#define CONVO_REDIS_CLUSTER_H

#include <convo/driver.h>
#include <hiredis/hiredis.h>
#include <stddef.h>

#define RCL_SLOTS 16384

typedef struct rcl rcl;             /* shared by a store: nodes and slot map */
typedef struct rcl_conns rcl_conns; /* one pooled connection: a socket per node */

/* Runs on every new node connection (AUTH, SCRIPT LOAD). */
typedef int (*rcl_setup_fn)(void *ctx, redisContext *c, convo_error *err);

typedef struct rcl_config {
    const char *hosts; /* "host:port[,host:port...]" */
    const char *prefix;
    const char *redacted;
    int connect_timeout_ms, timeout_ms;
    int wait_replicas, wait_timeout_ms; /* WAIT after writes; 0 = none */
    rcl_setup_fn setup;
    void *setup_ctx;
} rcl_config;

/* One command of a pipeline, in RESP form, classified by convo__rcl_classify. */
typedef struct rcl_cmd {
    const char *buf;
    size_t len;
    int slot;  /* hash slot of its first key; -1 when it has none */
    int kind;  /* RCL_PLAIN, RCL_MULTI, RCL_EXEC */
    int write; /* may write: WAIT follows it when wait_replicas > 0 */
} rcl_cmd;
enum { RCL_PLAIN, RCL_MULTI, RCL_EXEC };

int convo__rcl_new(rcl **out, const rcl_config *cfg, convo_error *err);
void convo__rcl_free(rcl *cl);

rcl_conns *convo__rcl_conns_new(void);
void convo__rcl_conns_free(rcl_conns *cc);
int convo__rcl_conns_broken(const rcl_conns *cc);

/* The hash slot of a key ({tag} rule) or of a thread's tag. */
unsigned convo__rcl_key_slot(const char *key, size_t len);
/* The thread index key of a slot: "P:threads:{T}", T hashing to that slot. */
const char *convo__rcl_index_key(const rcl *cl, unsigned slot, size_t *len);

void convo__rcl_classify(rcl_cmd *c, const char *const *argv, const size_t *lens, size_t argc);

/* Sends the commands, each to the master of its slot (a MULTI..EXEC block as
 * one), in order per node, following redirects; replies[i] gets each reply. */
int convo__rcl_run(rcl *cl, rcl_conns *cc, const rcl_cmd *cmds, size_t n, redisReply **replies,
                   convo_error *err);

/* The masters known now (node numbers), for work done on each (SCAN). Keyless
 * commands of convo__rcl_run go to the pinned node (-1: unpinned). */
int convo__rcl_masters(rcl *cl, int *nodes, int max);
void convo__rcl_pin(rcl_conns *cc, int node);

/* ZRANGEBYLEX over every slot's index key, merged in byte order: up to count
 * members after `from` ("(id" or "-"), as one array reply. */
int convo__rcl_index_range(rcl *cl, rcl_conns *cc, const char *from, size_t count,
                           redisReply **out, convo_error *err);

/* WAIT on a plain connection after writes: 0, or CONVO_ETIMEOUT when fewer
 * replicas than asked acknowledged in time. */
/* Writes all of iov[0..n) to fd with MSG_NOSIGNAL (a server that went away must
 * not kill the application with SIGPIPE); 0, or the errno of the failed send.
 * Used by the single-node and the cluster paths alike. May change iov. */
struct iovec;
int convo__rcl_sendv(int fd, struct iovec *iov, size_t n);

int convo__rcl_wait_check(const redisReply *r, int want, const char *redacted, convo_error *err);

#endif
