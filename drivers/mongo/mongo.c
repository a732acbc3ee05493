/* mongo.c — the MongoDB driver (mongo-c-driver). A thread is one document in
 * <prefix>_threads; its messages live in <prefix>_batches, one document per
 * append. Unique indexes, not transactions, make every call atomic: docs/mongo.md
 * walks through the layout and through every point where a process may die. */
#include "mongo_int.h"

static const char *const kind_suffix[KINDS] = {"_batches", "_checkpoints", "_values", "_writes"};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* libmongoc prints its own diagnostics (DEBUG lines about refused connections,
 * failed handshakes) on stderr; convo reports errors through convo_error, so only
 * critical ones get through. */
static void quiet_log(mongoc_log_level_t level, const char *domain, const char *message,
                      void *ctx)
{
    if (level == MONGOC_LOG_LEVEL_CRITICAL)
        mongoc_log_default_handler(level, domain, message, ctx);
}

/* libmongoc keeps its performance counters in /dev/shm/mongoc-PID, which it
 * removes only at a clean exit: every killed process that linked libconvo (a
 * SQLite-only one too: Debian's libmongoc initialises itself when it is
 * loaded) left one behind. The name goes as soon as it exists; the mapping,
 * which is all the counters use, stays. (Only mongoc-stat reads the file.) */
static void forget_counters_file(void)
{
    char name[32];
    snprintf(name, sizeof name, "/mongoc-%u", (unsigned)getpid());
    shm_unlink(name);
}

/* The loader runs libmongoc's own constructor (it is a dependency) first. */
__attribute__((constructor)) static void forget_counters_file_at_load(void)
{
    forget_counters_file();
}

static void init_mongoc(void)
{
    mongoc_init(); /* a no-op when libmongoc initialised itself at load */
    forget_counters_file();
    mongoc_log_set_handler(quiet_log, NULL);
}

/* ---- open and close ---- */

static int check_database(const char *db, convo_error *err)
{
    size_t n = strlen(db);
    if (n == 0 || n > 63 || strpbrk(db, "/\\. \"$*<>:|?"))
        return convo__error(err, CONVO_EINVAL, NULL,
                            "bad database name: 1..63 bytes without / \\ . space \" $ * < > : | ?");
    return 0;
}

static int check_prefix(const char *p, convo_error *err)
{
    size_t n = strlen(p);
    bool ok = n >= 1 && n <= 64 && p[0] != '.' && p[n - 1] != '.' && !strstr(p, "..") &&
              strncmp(p, "system", 6) != 0;
    for (const char *q = p; ok && *q; q++)
        ok = isalnum((unsigned char)*q) || *q == '_' || *q == '-' || *q == '.';
    if (!ok)
        return convo__error(err, CONVO_EINVAL, NULL,
                            "bad prefix: 1..64 of A-Z a-z 0-9 _ - . (no leading, trailing or "
                            "double dot, not system...)");
    return 0;
}

static bool is_integer(const char *s)
{
    if (*s == '-')
        s++;
    if (!*s)
        return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return false;
    return true;
}

/* key in lower case into buf; false when it is too long to be an option. */
static bool lower_copy(const char *key, char *buf, size_t size)
{
    size_t n = strlen(key);
    if (n >= size)
        return false;
    for (size_t i = 0; i <= n; i++)
        buf[i] = (char)tolower((unsigned char)key[i]);
    return true;
}

/* libmongoc only warns about unknown options and ignores them: reject them here,
 * with values of the wrong type and with unacknowledged writes. */
static int check_option(const char *key, const char *value, convo_error *err)
{
    static const char *const others[] = {"authmechanism", "authmechanismproperties",
                                         "authsource", "compressors", "gssapiservicename",
                                         "readconcernlevel", "readpreferencetags", "w", NULL};
    char lower[64] = "";
    bool known = lower_copy(key, lower, sizeof lower);
    bool integer =
        known && (mongoc_uri_option_is_int32(lower) || mongoc_uri_option_is_int64(lower));
    bool boolean = known && mongoc_uri_option_is_bool(lower);
    known = known && (integer || boolean || mongoc_uri_option_is_utf8(lower));
    for (const char *const *o = others; !known && *o; o++)
        known = strcmp(*o, lower) == 0;
    if (!known)
        return convo__error(err, CONVO_EINVAL, NULL,
                            "unknown URL parameter '%s' for mongodb: (convo takes database, "
                            "prefix and ttl; the others go to libmongoc)", key);
    if (integer && !is_integer(value))
        return convo__error(err, CONVO_EINVAL, NULL, "URL parameter '%s' must be an integer", key);
    if (boolean && strcmp(value, "true") != 0 && strcmp(value, "false") != 0)
        return convo__error(err, CONVO_EINVAL, NULL, "URL parameter '%s' must be true or false",
                            key);
    if ((strcmp(lower, "w") == 0 && (strcmp(value, "0") == 0 || strcmp(value, "-1") == 0)) ||
        (strcmp(lower, "safe") == 0 && strcmp(value, "false") == 0))
        return convo__error(err, CONVO_EINVAL, NULL,
                            "convo needs acknowledged writes: %s=%s is not allowed", key, value);
    return 0;
}

char *convo__mg_join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 1;
    char *out = malloc(n);
    if (out)
        snprintf(out, n, "%s%s", a, b);
    return out;
}

/* Takes database, prefix and ttl out of the URL. */
static int take_convo_params(convo_backend *b, convo_url *url, convo_error *err)
{
    char *prefix = convo__url_take(url, "prefix");
    int64_t ttl_s = 0;
    int ttl_rc = convo__url_take_ttl(url, &ttl_s, err);
    b->ttl_ms = ttl_s * 1000;
    b->database = convo__url_take(url, "database");
    if (!b->database)
        b->database = strdup("convo");
    int rc = ttl_rc ? ttl_rc : b->database ? check_database(b->database, err) : CONVO_ENOMEM;
    if (rc == 0 && prefix)
        rc = check_prefix(prefix, err);
    const char *p = prefix ? prefix : "convo";
    if (rc == 0 && (!(b->threads_name = convo__mg_join(p, "_threads")) ||
                    !(b->meta_name = convo__mg_join(p, "_meta"))))
        rc = CONVO_ENOMEM;
    for (int k = 0; k < KINDS && rc == 0; k++)
        if (!(b->kinds_name[k] = convo__mg_join(p, kind_suffix[k])))
            rc = CONVO_ENOMEM;
    b->batches_name = b->kinds_name[BATCHES];
    free(prefix);
    return rc == CONVO_ENOMEM ? convo__error(err, rc, NULL, "out of memory") : rc;
}

/* Checks the parameters left for libmongoc (the core keeps their secrets,
 * *password options included, out of messages). */
static int check_client_params(convo_backend *b, const convo_url *url, convo_error *err)
{
    (void)b;
    for (size_t i = 0; i < url->nparams; i++) {
        int rc = check_option(url->params[i].key, url->params[i].value, err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static void mongo_close(convo_backend *b)
{
    if (!b)
        return;
    if (b->pool)
        mongoc_client_pool_destroy(b->pool);
    mongoc_uri_destroy(b->uri);
    mongoc_read_prefs_destroy(b->primary);
    convo__mg_index_keys_free(b);
    free(b->database);
    free(b->threads_name);
    free(b->meta_name);
    for (int k = 0; k < KINDS; k++)
        free(b->kinds_name[k]);
    free(b);
}

/* Short timeouts unless the URL asks otherwise: libmongoc waits 30 s for a server. */
static void set_defaults(mongoc_uri_t *uri)
{
    const bson_t *opts = mongoc_uri_get_options(uri);
    if (!bson_has_field(opts, MONGOC_URI_SERVERSELECTIONTIMEOUTMS))
        mongoc_uri_set_option_as_int32(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS, 5000);
    if (!bson_has_field(opts, MONGOC_URI_CONNECTTIMEOUTMS))
        mongoc_uri_set_option_as_int32(uri, MONGOC_URI_CONNECTTIMEOUTMS, 5000);
    if (!mongoc_uri_get_appname(uri))
        mongoc_uri_set_appname(uri, "convo");
}

/* libmongoc wants "host/?opts"; convo also takes "host?opts", like its other URLs. */
static char *rebuild_for_mongoc(const convo_url *url)
{
    char *text = convo__url_rebuild(url);
    char *q = text ? strchr(text, '?') : NULL;
    char *hosts = text ? strstr(text, "://") : NULL;
    if (!q || !hosts || memchr(hosts + 3, '/', (size_t)(q - hosts - 3)))
        return text;
    size_t n = strlen(text);
    char *out = malloc(n + 2);
    if (out) {
        memcpy(out, text, (size_t)(q - text));
        out[q - text] = '/';
        memcpy(out + (q - text) + 1, q, n - (size_t)(q - text) + 1);
    }
    memset(text, 0, n);
    free(text);
    return out;
}

static int make_pool(convo_backend *b, convo_url *url, convo_error *err)
{
    char *text = rebuild_for_mongoc(url);
    if (!text)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    bson_error_t e;
    b->uri = mongoc_uri_new_with_error(text, &e);
    memset(text, 0, strlen(text)); /* it holds the password */
    free(text);
    if (!b->uri) {
        return convo__error(err, CONVO_EINVAL, NULL, "bad MongoDB URL %s: %s", url->redacted,
                            e.message);
    }
    set_defaults(b->uri);
    b->pool = mongoc_client_pool_new(b->uri);
    b->primary = mongoc_read_prefs_new(MONGOC_READ_PRIMARY);
    if (!b->pool || !b->primary)
        return convo__error(err, CONVO_EINVAL, NULL,
                            "MongoDB: cannot use %s (TLS or SRV support missing?)", url->redacted);
    mongoc_client_pool_set_error_api(b->pool, MONGOC_ERROR_API_VERSION_2);
    return 0;
}

static int mongo_open(convo_backend **out, convo_url *url, const convo_limits *limits,
                      convo_error *err)
{
    pthread_once(&init_once, init_mongoc);
    convo_backend *b = calloc(1, sizeof *b);
    if (!b)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    b->limits = *limits;
    int rc = take_convo_params(b, url, err);
    if (rc == 0)
        rc = check_client_params(b, url, err);
    if (rc == 0)
        rc = make_pool(b, url, err);
    if (rc == 0) {
        call c;
        convo__mg_call_begin(&c, b, err);
        rc = convo__mg_ensure_schema(&c);
        convo__mg_call_end(&c);
    }
    if (rc != 0) {
        mongo_close(b);
        return rc;
    }
    *out = b;
    return 0;
}

static const char *const mongo_schemes[] = {"mongodb", "mongodb+srv", NULL};

const convo_driver convo_driver_mongo = {
    .version = CONVO_DRIVER_VERSION,
    .name = "mongo",
    .schemes = mongo_schemes,
    .open = mongo_open,
    .close = mongo_close,
    .append = convo__mg_append,
    .load = convo__mg_load,
    .save_extra = convo__mg_save_extra,
    .thread_delete = convo__mg_thread_delete,
    .thread_list = convo__mg_thread_list,
    .thread_fork = convo__mg_thread_fork,
    .checkpoint_put = convo__mg_checkpoint_put,
    .checkpoint_put_writes = convo__mg_checkpoint_put_writes,
    .checkpoint_get = convo__mg_checkpoint_get,
    .checkpoint_list = convo__mg_checkpoint_list,
    .checkpoint_prune = convo__mg_checkpoint_prune,
    .checkpoint_delete = convo__mg_checkpoint_delete,
    .thread_copy = convo__mg_thread_copy,
    .checkpoint_put_log = convo__mg_checkpoint_put_log,
    .checkpoint_put_refs = convo__mg_checkpoint_put_refs,
    .bench_raw = convo__mg_bench_raw,
    .stored_bytes = convo__mg_stored_bytes,
    .thread_import = convo__mg_thread_import,
    .replace_tail = convo__mg_replace_tail,
    .thread_list_ex = convo__mg_thread_list_ex,
};
