/* redis_test.h — what the Redis driver's hiredis-level test programs share
 * (tests/redis-index.c, redis-layout.c, redis-window.c, redis-guess.c,
 * redis-layout8.c, redis-page-read.c): main's arguments, the server's nodes,
 * commands on them, stores on a fresh prefix. */
#ifndef CONVO_TESTS_REDIS_TEST_H
#define CONVO_TESTS_REDIS_TEST_H

#include <check.h>
#include <convo.h>
#include <hiredis/hiredis.h>
#include <stddef.h>

extern const char *base_url;    /* redis://HOST:PORT[...] or redis+cluster://... */
extern const char *base_prefix; /* every key a program writes starts with it */
extern int cluster;             /* base_url is a cluster's */
extern const char *const MSG;   /* {"role":"user","content":"hi"} */
extern const char *const user_keys[]; /* {"user_id", NULL}: the declared key */

/* main's arguments URL PREFIX into base_url, base_prefix and cluster.
 * Returns -1 to go on, else main's exit status: 2 (usage), or 77 when
 * one_server_only (the reason printed) is given and the URL is a cluster's. */
int redis_test_args(int argc, char **argv, const char *name, const char *one_server_only);
/* Runs su and frees it; main's exit status (1 when a test failed). */
int redis_test_run(Suite *su);

/* A fixture: connects to base_url's server (no password), or on a cluster to
 * each node of $CONVO_TEST_REDIS_CLUSTER_PORTS. */
void connect_nodes(void);
void disconnect_nodes(void);
extern redisContext *nodes[]; /* the connections, nnodes of them */
extern int nnodes;
/* The node that serves key: the one node, or the master that does not answer MOVED. */
redisContext *node_for(const char *key);
/* A command on the node of `key`, which must also be its first key; never an error reply. */
redisReply *on_key(const char *key, const char *fmt, ...);
/* The same, whose reply must be an integer. */
long long int_on(const char *key, const char *fmt, ...);

/* On one server only (nothing sent but the command): the connection, a command
 * that must not fail, the same with its reply freed, and a number the server
 * holds as text or an integer reply (-1 for nil). */
redisContext *server(void);
redisReply *cmd(const char *fmt, ...);
void cmd_ok(const char *fmt, ...);
long long num(const char *fmt, ...);

/* Redis Cluster's CRC16 of a key's tag. */
unsigned crc16(const char *p, size_t n);

/* A store on base_url with prefix=PREFIX, more parameters ("a=1&b=2", or NULL)
 * and the declared keys (NULL: none). */
convo_store *open_at(const char *prefix, const char *more, const char *const *keys);
/* The same on base_prefix + "-" + name, written to `prefix`. */
convo_store *open_store(const char *name, const char *more, const char *const *keys, char *prefix,
                        size_t size);
/* Thread id of user `user` (its extra's user_id) with one message, MSG. */
void user_thread(convo_store *s, const char *id, const char *user);

#endif
