/*
 * Smoke test for the MongoDB stand-in, using the real libmongoc client.
 *
 *   gcc smoke.c -o smoke $(pkg-config --cflags --libs libmongoc-1.0)
 *   ./smoke mongodb://127.0.0.1:PORT
 *
 * (run-smoke.sh does both and starts/stops the server.)  Prints one line per
 * check and ends with "N passed, M failed"; exits non-zero on any failure.
 */
#include <mongoc/mongoc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int passed = 0;
static int failed = 0;
static int getmore_count = 0;

#define CHECK(cond, ...)                                                       \
   do {                                                                        \
      if (cond) {                                                              \
         passed++;                                                             \
         printf ("ok   - ");                                                   \
      } else {                                                                 \
         failed++;                                                             \
         printf ("FAIL - ");                                                   \
      }                                                                        \
      printf (__VA_ARGS__);                                                    \
      printf ("\n");                                                           \
   } while (0)

/* APM hook: count getMore commands so we can prove cursors were iterated. */
static void
on_started (const mongoc_apm_command_started_t *event)
{
   if (strcmp (mongoc_apm_command_started_get_command_name (event), "getMore") == 0) {
      getmore_count++;
   }
}

static int64_t
get_int (const bson_t *doc, const char *path)
{
   bson_iter_t it;
   if (bson_iter_init (&it, doc) && bson_iter_find_descendant (&it, path, &it) &&
       BSON_ITER_HOLDS_NUMBER (&it)) {
      return bson_iter_as_int64 (&it);
   }
   return -999999;
}

static bson_type_t
get_type (const bson_t *doc, const char *path)
{
   bson_iter_t it;
   if (bson_iter_init (&it, doc) && bson_iter_find_descendant (&it, path, &it)) {
      return bson_iter_type (&it);
   }
   return BSON_TYPE_EOD;
}

static void
run_command (mongoc_database_t *db, const bson_t *cmd, bson_t *reply, bson_error_t *error, bool *ok)
{
   *ok = mongoc_database_write_command_with_opts (db, cmd, NULL, reply, error);
}

static void
test_types_and_order (mongoc_collection_t *coll)
{
   bson_error_t error;
   bson_t reply;
   const uint8_t bin[] = {0x00, 0x01, 0xfe, 0xff};
   bson_t *doc = BCON_NEW ("name", BCON_UTF8 ("alice"),
                           "i32", BCON_INT32 (7),
                           "i64", BCON_INT64 (1099511627776LL),
                           "small64", BCON_INT64 (5),
                           "dbl", BCON_DOUBLE (2.0),
                           "bin", BCON_BIN (BSON_SUBTYPE_BINARY, bin, sizeof bin),
                           "when", BCON_DATE_TIME (1700000000123LL),
                           "nested", "{", "z", BCON_INT32 (1), "a", BCON_INT32 (2), "10", BCON_INT32 (3), "}");
   bool ok = mongoc_collection_insert_one (coll, doc, NULL, &reply, &error);
   CHECK (ok && get_int (&reply, "insertedCount") == 1, "insert_one (%s)", ok ? "inserted" : error.message);
   bson_destroy (&reply);
   bson_destroy (doc);

   bson_t *filter = BCON_NEW ("name", BCON_UTF8 ("alice"));
   mongoc_cursor_t *cur = mongoc_collection_find_with_opts (coll, filter, NULL, NULL);
   const bson_t *found;
   bool got = mongoc_cursor_next (cur, &found);
   CHECK (got, "find inserted document back");
   if (got) {
      CHECK (get_type (found, "_id") == BSON_TYPE_OID, "auto-generated ObjectId _id");
      CHECK (get_type (found, "i32") == BSON_TYPE_INT32, "int32 preserved");
      CHECK (get_type (found, "i64") == BSON_TYPE_INT64 && get_int (found, "i64") == 1099511627776LL,
             "int64 preserved");
      CHECK (get_type (found, "small64") == BSON_TYPE_INT64, "small int64 stays int64");
      CHECK (get_type (found, "dbl") == BSON_TYPE_DOUBLE, "integral double stays double");
      CHECK (get_type (found, "when") == BSON_TYPE_DATE_TIME, "date preserved");
      bson_iter_t it;
      bson_subtype_t st = 99;
      uint32_t len = 0;
      const uint8_t *data = NULL;
      if (bson_iter_init_find (&it, found, "bin") && BSON_ITER_HOLDS_BINARY (&it)) {
         bson_iter_binary (&it, &st, &len, &data);
      }
      CHECK (st == BSON_SUBTYPE_BINARY && len == 4 && memcmp (data, bin, 4) == 0, "binary subtype 0 preserved");
      /* key order: _id first, then insertion order, including the numeric-looking key */
      const char *expect[] = {"_id", "name", "i32", "i64", "small64", "dbl", "bin", "when", "nested"};
      int i = 0, order_ok = 1;
      bson_iter_init (&it, found);
      while (bson_iter_next (&it) && i < 9) {
         if (strcmp (bson_iter_key (&it), expect[i++]) != 0) order_ok = 0;
      }
      CHECK (order_ok && i == 9, "top-level key order preserved");
      bson_iter_t child;
      char keys[32] = "";
      if (bson_iter_init_find (&it, found, "nested") && bson_iter_recurse (&it, &child)) {
         while (bson_iter_next (&child)) {
            strcat (keys, bson_iter_key (&child));
            strcat (keys, ",");
         }
      }
      CHECK (strcmp (keys, "z,a,10,") == 0, "nested key order preserved (got %s)", keys);
   }
   mongoc_cursor_destroy (cur);
   bson_destroy (filter);

   /* $inc keeps int64 as int64 */
   bson_t *sel = BCON_NEW ("name", BCON_UTF8 ("alice"));
   bson_t *upd = BCON_NEW ("$inc", "{", "small64", BCON_INT32 (1), "i32", BCON_INT32 (1), "}");
   ok = mongoc_collection_update_one (coll, sel, upd, NULL, NULL, &error);
   CHECK (ok, "update_one $inc (%s)", ok ? "ok" : error.message);
   cur = mongoc_collection_find_with_opts (coll, sel, NULL, NULL);
   if (mongoc_cursor_next (cur, &found)) {
      CHECK (get_type (found, "small64") == BSON_TYPE_INT64 && get_int (found, "small64") == 6,
             "$inc int64 + int32 -> int64");
      CHECK (get_type (found, "i32") == BSON_TYPE_INT32 && get_int (found, "i32") == 8, "$inc int32 + int32 -> int32");
   } else {
      CHECK (0, "re-read after $inc");
   }
   mongoc_cursor_destroy (cur);
   bson_destroy (sel);
   bson_destroy (upd);
}

static void
test_insert_many (mongoc_collection_t *coll)
{
   bson_t *docs[20];
   bson_error_t error;
   bson_t reply;
   for (int i = 0; i < 20; i++) {
      docs[i] = BCON_NEW ("i", BCON_INT32 (i), "group", BCON_INT32 (i % 3), "tag", BCON_UTF8 ("t"));
   }
   bool ok = mongoc_collection_insert_many (coll, (const bson_t **) docs, 20, NULL, &reply, &error);
   CHECK (ok && get_int (&reply, "insertedCount") == 20, "insert_many 20 documents (%s)", ok ? "ok" : error.message);
   bson_destroy (&reply);
   for (int i = 0; i < 20; i++) bson_destroy (docs[i]);
}

static void
test_unique_index (mongoc_database_t *db, mongoc_collection_t *users)
{
   bson_error_t error;
   bson_t reply;
   bool ok;
   bson_t *cmd = BCON_NEW ("createIndexes", BCON_UTF8 ("users"),
                           "indexes", "[", "{", "key", "{", "email", BCON_INT32 (1), "}",
                           "name", BCON_UTF8 ("email_1"), "unique", BCON_BOOL (true), "}", "]");
   run_command (db, cmd, &reply, &error, &ok);
   CHECK (ok && get_int (&reply, "numIndexesAfter") == 2, "createIndexes unique email_1 (%s)", ok ? "ok" : error.message);
   bson_destroy (&reply);
   run_command (db, cmd, &reply, &error, &ok);
   CHECK (ok && get_int (&reply, "numIndexesAfter") == 2, "createIndexes again is idempotent");
   bson_destroy (&reply);
   bson_destroy (cmd);

   bson_t *a = BCON_NEW ("email", BCON_UTF8 ("a@example.com"));
   ok = mongoc_collection_insert_one (users, a, NULL, NULL, &error);
   CHECK (ok, "insert first a@example.com");
   ok = mongoc_collection_insert_one (users, a, NULL, &reply, &error);
   CHECK (!ok && error.code == 11000, "duplicate insert fails with code 11000 (got %u: %s)", error.code, error.message);
   CHECK (strstr (error.message,
                  "E11000 duplicate key error collection: convo_smoke.users index: email_1 dup key") != NULL,
          "E11000 message format");
   CHECK (get_int (&reply, "writeErrors.0.code") == 11000, "reply writeErrors.0.code == 11000");
   bson_destroy (&reply);

   /* update into a duplicate must fail as well */
   bson_t *b = BCON_NEW ("email", BCON_UTF8 ("b@example.com"));
   mongoc_collection_insert_one (users, b, NULL, NULL, &error);
   bson_t *upd = BCON_NEW ("$set", "{", "email", BCON_UTF8 ("a@example.com"), "}");
   ok = mongoc_collection_update_one (users, b, upd, NULL, &reply, &error);
   CHECK (!ok && error.code == 11000, "update into duplicate fails with 11000 (got %u)", error.code);
   bson_destroy (&reply);

   /* two documents missing the field collide on null */
   bson_t *nomail = BCON_NEW ("name", BCON_UTF8 ("x"));
   ok = mongoc_collection_insert_one (users, nomail, NULL, NULL, &error);
   CHECK (ok, "insert without email");
   ok = mongoc_collection_insert_one (users, nomail, NULL, NULL, &error);
   CHECK (!ok && error.code == 11000, "second insert without email collides on null");

   bson_destroy (a);
   bson_destroy (b);
   bson_destroy (upd);
   bson_destroy (nomail);
}

static void
test_upsert (mongoc_collection_t *coll)
{
   bson_error_t error;
   bson_t reply;
   bson_t *sel = BCON_NEW ("key", BCON_UTF8 ("k1"));
   bson_t *opts = BCON_NEW ("upsert", BCON_BOOL (true));
   bson_t *upd = BCON_NEW ("$set", "{", "v", BCON_INT32 (1), "}");
   bool ok = mongoc_collection_update_one (coll, sel, upd, opts, &reply, &error);
   CHECK (ok && get_int (&reply, "upsertedCount") == 1 && get_type (&reply, "upsertedId") == BSON_TYPE_OID,
          "update_one $set upsert inserts (%s)", ok ? "ok" : error.message);
   bson_destroy (&reply);
   bson_destroy (upd);

   upd = BCON_NEW ("$set", "{", "v", BCON_INT32 (2), "}");
   ok = mongoc_collection_update_one (coll, sel, upd, opts, &reply, &error);
   CHECK (ok && get_int (&reply, "matchedCount") == 1 && get_int (&reply, "modifiedCount") == 1 &&
             get_int (&reply, "upsertedCount") == 0,
          "update_one $set upsert updates existing");
   bson_destroy (&reply);
   ok = mongoc_collection_update_one (coll, sel, upd, opts, &reply, &error);
   CHECK (ok && get_int (&reply, "matchedCount") == 1 && get_int (&reply, "modifiedCount") == 0,
          "no-op update reports modifiedCount 0");
   bson_destroy (&reply);
   bson_destroy (upd);
   bson_destroy (opts);
   bson_destroy (sel);
}

static void
test_find_getmore (mongoc_collection_t *coll)
{
   bson_t *filter = BCON_NEW ("group", "{", "$gte", BCON_INT32 (1), "}");
   bson_t *opts = BCON_NEW ("sort", "{", "i", BCON_INT32 (-1), "}", "limit", BCON_INT64 (10),
                            "batchSize", BCON_INT32 (3), "projection", "{", "i", BCON_INT32 (1), "_id", BCON_INT32 (0), "}");
   int before = getmore_count;
   mongoc_cursor_t *cur = mongoc_collection_find_with_opts (coll, filter, opts, NULL);
   const bson_t *doc;
   int n = 0, sorted = 1, filtered = 1, projected = 1;
   int64_t last = 1000;
   while (mongoc_cursor_next (cur, &doc)) {
      int64_t i = get_int (doc, "i");
      if (i >= last) sorted = 0;
      if (i % 3 == 0) filtered = 0;
      if (bson_count_keys (doc) != 1) projected = 0;
      last = i;
      n++;
   }
   bson_error_t error;
   bool err = mongoc_cursor_error (cur, &error);
   CHECK (!err, "find cursor without error (%s)", err ? error.message : "ok");
   CHECK (n == 10, "find with limit 10 returned %d", n);
   CHECK (sorted && filtered && projected, "find sorted descending, filtered and projected");
   CHECK (getmore_count - before >= 3, "batchSize 3 forced getMore (%d getMores)", getmore_count - before);
   mongoc_cursor_destroy (cur);
   bson_destroy (opts);
   bson_destroy (filter);
}

static void
test_find_and_modify (mongoc_collection_t *coll)
{
   bson_error_t error;
   bson_t reply;
   bson_t *query = BCON_NEW ("_id", BCON_UTF8 ("counter"));
   bson_t *update = BCON_NEW ("$inc", "{", "count", BCON_INT32 (1), "}");
   mongoc_find_and_modify_opts_t *fam = mongoc_find_and_modify_opts_new ();
   mongoc_find_and_modify_opts_set_update (fam, update);
   mongoc_find_and_modify_opts_set_flags (fam, MONGOC_FIND_AND_MODIFY_UPSERT | MONGOC_FIND_AND_MODIFY_RETURN_NEW);
   for (int round = 1; round <= 2; round++) {
      bool ok = mongoc_collection_find_and_modify_with_opts (coll, query, fam, &reply, &error);
      CHECK (ok && get_int (&reply, "value.count") == round && get_type (&reply, "value.count") == BSON_TYPE_INT32,
             "find_and_modify $inc upsert+new round %d (%s)", round, ok ? "ok" : error.message);
      if (round == 1) {
         CHECK (get_type (&reply, "lastErrorObject.upserted") == BSON_TYPE_UTF8, "lastErrorObject.upserted set");
      } else {
         bson_iter_t it;
         CHECK (bson_iter_init (&it, &reply) && bson_iter_find_descendant (&it, "lastErrorObject.updatedExisting", &it) &&
                   bson_iter_as_bool (&it),
                "lastErrorObject.updatedExisting true");
      }
      bson_destroy (&reply);
   }
   mongoc_find_and_modify_opts_destroy (fam);
   bson_destroy (update);
   bson_destroy (query);
}

static void
test_delete_and_aggregate (mongoc_collection_t *coll)
{
   bson_error_t error;
   bson_t reply;
   bson_t *sel = BCON_NEW ("group", BCON_INT32 (0));
   bool ok = mongoc_collection_delete_many (coll, sel, NULL, &reply, &error);
   CHECK (ok && get_int (&reply, "deletedCount") == 7, "delete_many group 0 removed %lld", (long long) get_int (&reply, "deletedCount"));
   bson_destroy (&reply);
   bson_destroy (sel);

   bson_t *pipeline = BCON_NEW ("pipeline", "[",
                                "{", "$match", "{", "tag", BCON_UTF8 ("t"), "}", "}",
                                "{", "$group", "{", "_id", BCON_UTF8 ("$group"),
                                "total", "{", "$sum", BCON_UTF8 ("$i"), "}",
                                "n", "{", "$sum", BCON_INT32 (1), "}", "}", "}",
                                "{", "$sort", "{", "_id", BCON_INT32 (1), "}", "}", "]");
   mongoc_cursor_t *cur = mongoc_collection_aggregate (coll, MONGOC_QUERY_NONE, pipeline, NULL, NULL);
   const bson_t *doc;
   int64_t got[2][3] = {{0}};
   int n = 0;
   while (mongoc_cursor_next (cur, &doc) && n < 2) {
      got[n][0] = get_int (doc, "_id");
      got[n][1] = get_int (doc, "total");
      got[n][2] = get_int (doc, "n");
      n++;
   }
   CHECK (!mongoc_cursor_error (cur, &error), "aggregate without error");
   CHECK (n == 2 && got[0][0] == 1 && got[0][1] == 70 && got[0][2] == 7 && got[1][0] == 2 && got[1][1] == 57 &&
             got[1][2] == 6,
          "aggregate $match/$group/$sort results");
   mongoc_cursor_destroy (cur);
   bson_destroy (pipeline);

   bson_t *filter = BCON_NEW ("group", BCON_INT32 (1));
   int64_t c = mongoc_collection_count_documents (coll, filter, NULL, NULL, NULL, &error);
   CHECK (c == 7, "count_documents == 7 (got %lld)", (long long) c);
   bson_destroy (filter);
   c = mongoc_collection_estimated_document_count (coll, NULL, NULL, NULL, &error);
   CHECK (c == 16, "estimated_document_count == 16 (got %lld: %s)", (long long) c, c < 0 ? error.message : "ok");
}

static void
test_ttl (mongoc_database_t *db, mongoc_collection_t *coll)
{
   bson_error_t error;
   bson_t reply;
   bool ok;
   bson_t *cmd = BCON_NEW ("createIndexes", BCON_UTF8 ("ttl"),
                           "indexes", "[", "{", "key", "{", "createdAt", BCON_INT32 (1), "}",
                           "name", BCON_UTF8 ("createdAt_1"), "expireAfterSeconds", BCON_INT32 (1), "}", "]");
   run_command (db, cmd, &reply, &error, &ok);
   CHECK (ok, "createIndexes TTL (%s)", ok ? "ok" : error.message);
   bson_destroy (&reply);
   bson_destroy (cmd);

   int64_t now = (int64_t) time (NULL) * 1000;
   bson_t *old = BCON_NEW ("what", BCON_UTF8 ("old"), "createdAt", BCON_DATE_TIME (now - 10000));
   bson_t *fresh = BCON_NEW ("what", BCON_UTF8 ("fresh"), "createdAt", BCON_DATE_TIME (now + 3600000));
   mongoc_collection_insert_one (coll, old, NULL, NULL, &error);
   mongoc_collection_insert_one (coll, fresh, NULL, NULL, &error);
   bson_t empty = BSON_INITIALIZER;
   int64_t c = -1;
   for (int i = 0; i < 30; i++) { /* up to 3 seconds */
      c = mongoc_collection_count_documents (coll, &empty, NULL, NULL, NULL, &error);
      if (c == 1) break;
      usleep (100 * 1000);
   }
   CHECK (c == 1, "TTL monitor removed the expired document (count %lld)", (long long) c);
   bson_destroy (old);
   bson_destroy (fresh);
}

static void
test_misc (mongoc_client_t *client, mongoc_collection_t *coll)
{
   bson_error_t error;
   bson_t reply;
   bson_t *cmd = BCON_NEW ("noSuchCommand", BCON_INT32 (1));
   bool ok = mongoc_client_command_simple (client, "admin", cmd, NULL, &reply, &error);
   CHECK (!ok && error.code == 59, "unknown command answers code 59 (got %u)", error.code);
   bson_destroy (&reply);
   bson_destroy (cmd);

   mongoc_cursor_t *cur = mongoc_collection_find_indexes_with_opts (coll, NULL);
   const bson_t *doc;
   int n = 0;
   while (mongoc_cursor_next (cur, &doc)) n++;
   CHECK (n == 2, "listIndexes on users returns 2 indexes (got %d)", n);
   mongoc_cursor_destroy (cur);
}

int
main (int argc, char **argv)
{
   const char *uri_str = argc > 1 ? argv[1] : getenv ("MONGO_URI");
   if (!uri_str) {
      fprintf (stderr, "usage: %s mongodb://127.0.0.1:PORT\n", argv[0]);
      return 2;
   }
   mongoc_init ();
   bson_error_t error;
   mongoc_uri_t *uri = mongoc_uri_new_with_error (uri_str, &error);
   if (!uri) {
      fprintf (stderr, "bad uri: %s\n", error.message);
      return 2;
   }
   mongoc_uri_set_option_as_int32 (uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS, 3000);
   mongoc_client_pool_t *pool = mongoc_client_pool_new (uri);
   mongoc_client_pool_set_error_api (pool, MONGOC_ERROR_API_VERSION_2);
   mongoc_apm_callbacks_t *cbs = mongoc_apm_callbacks_new ();
   mongoc_apm_set_command_started_cb (cbs, on_started);
   mongoc_client_pool_set_apm_callbacks (pool, cbs, NULL);
   mongoc_client_t *client = mongoc_client_pool_pop (pool);

   bson_t *ping = BCON_NEW ("ping", BCON_INT32 (1));
   bson_t reply;
   bool ok = mongoc_client_command_simple (client, "admin", ping, NULL, &reply, &error);
   CHECK (ok, "ping (%s)", ok ? "ok" : error.message);
   bson_destroy (&reply);
   bson_destroy (ping);

   mongoc_database_t *db = mongoc_client_get_database (client, "convo_smoke");
   mongoc_database_drop (db, NULL);
   mongoc_collection_t *items = mongoc_database_get_collection (db, "items");
   mongoc_collection_t *users = mongoc_database_get_collection (db, "users");
   mongoc_collection_t *ttl = mongoc_database_get_collection (db, "ttl");

   test_types_and_order (items);
   test_insert_many (items);
   test_unique_index (db, users);
   test_upsert (items);
   test_find_getmore (items);
   test_find_and_modify (items);
   test_delete_and_aggregate (items);
   test_ttl (db, ttl);
   test_misc (client, users);

   mongoc_collection_destroy (items);
   mongoc_collection_destroy (users);
   mongoc_collection_destroy (ttl);
   mongoc_database_destroy (db);
   mongoc_client_pool_push (pool, client);
   mongoc_client_pool_destroy (pool);
   mongoc_apm_callbacks_destroy (cbs);
   mongoc_uri_destroy (uri);
   mongoc_cleanup ();

   printf ("%d passed, %d failed\n", passed, failed);
   return failed ? 1 : 0;
}
