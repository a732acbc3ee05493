/* convo.c — the command-line tool: append, load, inspect, fork and delete
 * conversation threads in any store libconvo opens by URL. It uses only the
 * public header <convo.h>, and jansson to quote roles in `load --with-meta`. */
#include "bench.h"
#include "dump.h"
#include <convo.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Exit statuses; scripts rely on them (docs/cli.md). */
enum {
    STATUS_HELP = -1, /* internal: --help after a command; prints its usage, exits 0 */
    STATUS_OK = 0,
    STATUS_ERROR = 1,
    STATUS_USAGE = 2,
    STATUS_NOTFOUND = 3,
    STATUS_CONFLICT = 4,
    STATUS_TOOLARGE = 5,
    STATUS_STORED_NO_OUTPUT = 6 /* the write was stored; printing its result failed */
};

#define DEFAULT_URL "sqlite:convo.db"
#define MAX_OPTIONS 8
#define THREAD_PAGE 1000

typedef struct command command;

/* One parsed command line: positional arguments and the options given. */
typedef struct invocation {
    const command *cmd;
    char **args; /* positional arguments after the command name */
    int nargs;
    const char *opt_spec[MAX_OPTIONS];  /* the command's option spec, e.g. "--from=" */
    const char *opt_value[MAX_OPTIONS]; /* "" for a flag */
    int nopts;
} invocation;

struct command {
    const char *name;
    int (*run)(convo_store *s, const invocation *inv); /* s is NULL when !opens_store */
    int (*run_raw)(const char *url, int argc, char **argv); /* argv[0] is the command */
    int opens_store;
    int min_args, max_args; /* positional arguments; max -1 = any number */
    const char *options[MAX_OPTIONS]; /* "--from=" takes a value, "--with-meta" is a flag */
    const char *usage;
    const char *summary;
};

static const command *find_command(const char *name);
static void print_help(FILE *f);

/* ---- errors and usage ---- */

static int status_for(int code)
{
    switch (code) {
    case CONVO_ENOTFOUND: return STATUS_NOTFOUND;
    case CONVO_ECONFLICT: return STATUS_CONFLICT;
    case CONVO_ETOOLARGE: return STATUS_TOOLARGE;
    default: return STATUS_ERROR;
    }
}

/* Prints the library's one-line message (never holds a password) and maps the code. */
static int fail(int code, const convo_error *err)
{
    const char *msg = err && err->message[0] ? err->message : convo_strerror(code);
    fprintf(stderr, "convo: %s\n", msg);
    return status_for(code);
}

static int fail_msg(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("convo: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return status;
}

/* "usage: convo ..." for one command; --url only where the command uses it (not
 * copy, which takes its two URLs as arguments, nor help). */
static void print_usage(FILE *f, const command *cmd)
{
    int url = cmd->opens_store || cmd->run_raw;
    fprintf(f, "usage: convo %s%s\n", url ? "[--url URL] " : "", cmd->usage);
}

static int usage_error(const command *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("convo: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    if (cmd)
        print_usage(stderr, cmd);
    else
        fputs("usage: convo [--url URL] COMMAND [ARGS ...]   (convo help: the list)\n", stderr);
    return STATUS_USAGE;
}

/* ---- options ---- */

static const char *opt_value(const invocation *inv, const char *name)
{
    size_t len = strlen(name);
    for (int i = 0; i < inv->nopts; i++)
        if (strncmp(inv->opt_spec[i], name, len) == 0 && strcspn(inv->opt_spec[i], "=") == len)
            return inv->opt_value[i];
    return NULL;
}

/* Reads a non-negative integer option strictly (digits only, no overflow);
 * leaves *out untouched when the option is absent. */
static int opt_count(const invocation *inv, const char *name, int64_t *out)
{
    const char *v = opt_value(inv, name);
    if (!v)
        return STATUS_OK;
    char *end;
    errno = 0;
    long long n = (*v >= '0' && *v <= '9') ? strtoll(v, &end, 10) : -1;
    if (n < 0 || errno != 0 || *end != '\0')
        return usage_error(inv->cmd, "%s needs a non-negative integer, not '%.40s'", name, v);
    *out = (int64_t)n;
    return STATUS_OK;
}

/* Finds `name` (without "=value") among the command's options; *takes_value says
 * whether it needs a value. Returns the canonical name, or NULL when unknown. */
static const char *match_option(const command *cmd, const char *name, size_t len, int *takes_value)
{
    for (int i = 0; i < MAX_OPTIONS && cmd->options[i]; i++) {
        const char *o = cmd->options[i];
        size_t olen = strcspn(o, "=");
        if (olen == len && strncmp(o, name, len) == 0) {
            *takes_value = o[olen] == '=';
            return o;
        }
    }
    return NULL;
}

static int add_option(invocation *inv, const char *arg, char **argv, int argc, int *i)
{
    size_t len = strcspn(arg, "=");
    int takes_value;
    const char *spec = match_option(inv->cmd, arg, len, &takes_value);
    if (!spec)
        return usage_error(inv->cmd, "unknown option '%.*s' for %s", (int)(len > 40 ? 40 : len),
                           arg, inv->cmd->name);
    const char *value = "";
    if (takes_value && arg[len] == '=')
        value = arg + len + 1;
    else if (takes_value && *i + 1 < argc)
        value = argv[++*i];
    else if (takes_value)
        return usage_error(inv->cmd, "option %.*s needs a value", (int)len, arg);
    else if (arg[len] == '=')
        return usage_error(inv->cmd, "option %.*s takes no value", (int)len, arg);
    for (int k = 0; k < inv->nopts; k++)
        if (inv->opt_spec[k] == spec)
            return usage_error(inv->cmd, "option %.*s given twice", (int)len, arg);
    inv->opt_spec[inv->nopts] = spec;
    inv->opt_value[inv->nopts++] = value;
    return STATUS_OK;
}

/* Splits a command's arguments into options (anywhere, or none after "--")
 * and positional arguments. JSON arguments never start with "--". */
static int parse_args(invocation *inv, int argc, char **argv)
{
    int only_positional = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int rc = STATUS_OK;
        if (!only_positional && strcmp(a, "--") == 0)
            only_positional = 1;
        else if (!only_positional && strcmp(a, "--help") == 0)
            return STATUS_HELP;
        else if (!only_positional && strncmp(a, "--", 2) == 0)
            rc = add_option(inv, a, argv, argc, &i);
        else
            inv->args[inv->nargs++] = argv[i];
        if (rc != STATUS_OK)
            return rc;
    }
    const command *c = inv->cmd;
    if (inv->nargs < c->min_args || (c->max_args >= 0 && inv->nargs > c->max_args))
        return usage_error(c, "%s: %s arguments", c->name,
                           inv->nargs < c->min_args ? "missing" : "too many");
    return STATUS_OK;
}

/* ---- reading JSON Lines from stdin ---- */

typedef struct batch {
    char *buf;          /* all of stdin */
    const char **msgs;  /* pointers into buf */
    size_t *lens;
    size_t *line_no;    /* 1-based line of each message, for error messages */
    size_t n;
} batch;

static void batch_free(batch *b)
{
    free(b->buf);
    free(b->msgs);
    free(b->lens);
    free(b->line_no);
}

static int blank(const char *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
            return 0;
    return 1;
}

/* Reads standard input up to the limits of one call, so that `< /dev/zero` or a
 * runaway producer stops at the limit instead of growing the buffer until memory
 * runs out: at most max_total bytes, no line over max_line bytes, at most
 * max_lines non-blank lines (0 = no such limit). what names the input in errors. */
static int read_limited(FILE *in, size_t max_total, size_t max_line, size_t max_lines,
                        const char *what, char **out, size_t *len)
{
    size_t cap = 1 << 16, n = 0, line_start = 0, lines = 0, line = 1;
    char *buf = malloc(cap);
    int st = buf ? STATUS_OK : fail_msg(STATUS_ERROR, "out of memory reading standard input");
    while (st == STATUS_OK) {
        if (n == cap) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                st = fail_msg(STATUS_ERROR, "out of memory reading standard input");
                break;
            }
            buf = bigger;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, in);
        for (size_t i = n; i < n + got; i++)
            if (buf[i] == '\n') {
                lines += !blank(buf + line_start, i - line_start);
                line_start = i + 1;
                line++;
            }
        n += got;
        if (max_total && n > max_total)
            st = fail_msg(STATUS_TOOLARGE, "%s is over the limit of %zu bytes", what, max_total);
        else if (max_line && n - line_start > max_line)
            st = fail_msg(STATUS_TOOLARGE, "line %zu of %s is over the limit of %zu bytes for "
                          "a message", line, what, max_line);
        else if (max_lines && lines > max_lines)
            st = fail_msg(STATUS_TOOLARGE, "%s holds more than %zu messages, the limit for one "
                          "append", what, max_lines);
        else if (got == 0)
            break;
    }
    if (st == STATUS_OK && ferror(in))
        st = fail_msg(STATUS_ERROR, "cannot read standard input: %s", strerror(errno));
    if (st != STATUS_OK) {
        free(buf);
        return st;
    }
    *out = buf;
    *len = n;
    return STATUS_OK;
}

/* One message per non-blank line; a line's bytes (without its '\n') are stored as is. */
static int read_lines(FILE *in, batch *b)
{
    size_t len = 0;
    int st = read_limited(in, 0, CONVO_DEFAULT_MAX_MESSAGE_BYTES,
                          CONVO_DEFAULT_MAX_BATCH_MESSAGES, "standard input", &b->buf, &len);
    if (st != STATUS_OK)
        return st;
    size_t lines = 1;
    for (size_t i = 0; i < len; i++)
        lines += b->buf[i] == '\n';
    b->msgs = malloc(lines * sizeof *b->msgs);
    b->lens = malloc(lines * sizeof *b->lens);
    b->line_no = malloc(lines * sizeof *b->line_no);
    if (!b->msgs || !b->lens || !b->line_no)
        return fail_msg(STATUS_ERROR, "out of memory reading standard input");
    size_t start = 0, line = 1;
    while (start < len) {
        const char *nl = memchr(b->buf + start, '\n', len - start);
        size_t end = nl ? (size_t)(nl - b->buf) : len;
        if (!blank(b->buf + start, end - start)) {
            b->msgs[b->n] = b->buf + start;
            b->lens[b->n] = end - start;
            b->line_no[b->n++] = line;
        }
        start = end + 1;
        line++;
    }
    if (b->n == 0)
        return fail_msg(STATUS_ERROR, "no messages to append: standard input has no JSON lines");
    return STATUS_OK;
}

/* The core names a rejected message of a batch "message I: ..." (0-based) or,
 * for a batch of one, "message ...". Say which line or argument it was instead. */
static void name_rejected_message(convo_error *err, const batch *b, int from_stdin)
{
    size_t i = 0;
    int skip = 0;
    int in_batch = sscanf(err->message, "message %zu: %n", &i, &skip) == 1 && skip > 0 && i < b->n;
    int alone = b->n == 1 && strncmp(err->message, "message ", 8) == 0 &&
                (err->code == CONVO_EINVAL || err->code == CONVO_ETOOLARGE);
    if (!in_batch && !alone)
        return;
    if (!in_batch)
        i = 0, skip = 0;
    char text[sizeof err->message + 64];
    int n = snprintf(text, sizeof text, "%s %zu: %s", from_stdin ? "line" : "JSON argument",
                     from_stdin ? b->line_no[i] : i + 1, err->message + skip);
    size_t keep = n < 0 ? 0 : (size_t)n < sizeof err->message ? (size_t)n : sizeof err->message - 1;
    memcpy(err->message, text, keep);
    err->message[keep] = '\0';
}

/* ---- commands ---- */

static int cmd_append(convo_store *s, const invocation *inv)
{
    convo_append_opts opts = CONVO_APPEND_OPTS_INIT;
    opts.idempotency_key = opt_value(inv, "--idempotency-key");
    int st = opt_count(inv, "--expect-length", &opts.expected_length);
    if (st != STATUS_OK)
        return st;
    batch b = {0};
    int from_stdin = inv->nargs == 1;
    if (from_stdin) {
        if ((st = read_lines(stdin, &b)) != STATUS_OK) {
            batch_free(&b);
            return st;
        }
    } else {
        b.msgs = (const char **)inv->args + 1;
        b.n = (size_t)inv->nargs - 1;
    }
    convo_append_result res;
    convo_error err;
    int rc = convo_append(s, inv->args[0], b.msgs, b.lens, b.n, &opts, &res, &err);
    if (rc != 0) {
        name_rejected_message(&err, &b, from_stdin);
        st = fail(rc, &err);
    } else {
        printf("%lld %zu\n", (long long)res.first_seq, res.count);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            /* a retry would store the batch again: say that it is stored */
            fprintf(stderr, "convo: the batch is stored (first seq %lld, %zu messages) but "
                    "standard output could not be written: %s\n", (long long)res.first_seq,
                    res.count, strerror(errno));
            st = STATUS_STORED_NO_OUTPUT;
        }
    }
    if (from_stdin)
        batch_free(&b);
    return st;
}

/* {"seq":N,"created_at":"...","role":"...","message":<stored bytes>} */
static int print_with_meta(const convo_history *h, size_t i)
{
    size_t len;
    const char *msg = convo_history_message(h, i, &len);
    json_t *role = json_string(convo_history_role(h, i));
    char *quoted = role ? json_dumps(role, JSON_ENCODE_ANY) : NULL;
    json_decref(role);
    if (!quoted)
        return fail_msg(STATUS_ERROR, "cannot encode the role of message %lld",
                        (long long)convo_history_seq(h, i));
    char when[40];
    convo_format_time(convo_history_created_at(h, i), when, sizeof when);
    printf("{\"seq\":%lld,\"created_at\":\"%s\",\"role\":%s,\"message\":",
           (long long)convo_history_seq(h, i), when, quoted);
    fwrite(msg, 1, len, stdout);
    fputs("}\n", stdout);
    free(quoted);
    return STATUS_OK;
}

static int cmd_load(convo_store *s, const invocation *inv)
{
    convo_load_opts opts = CONVO_LOAD_OPTS_INIT;
    opts.with_extra = 0;
    int st = opt_count(inv, "--from", &opts.from_seq);
    if (st == STATUS_OK)
        st = opt_count(inv, "--limit", &opts.limit);
    if (st == STATUS_OK)
        st = opt_count(inv, "--tail", &opts.tail);
    if (st != STATUS_OK)
        return st;
    int with_meta = opt_value(inv, "--with-meta") != NULL;
    convo_history *h;
    convo_error err;
    int rc = convo_load(s, inv->args[0], &opts, &h, &err);
    if (rc != 0)
        return fail(rc, &err);
    for (size_t i = 0; i < convo_history_count(h) && st == STATUS_OK; i++) {
        if (with_meta) {
            st = print_with_meta(h, i);
        } else {
            size_t len;
            const char *msg = convo_history_message(h, i, &len);
            fwrite(msg, 1, len, stdout);
            putchar('\n');
        }
    }
    convo_history_free(h);
    return st;
}

static int cmd_extra(convo_store *s, const invocation *inv)
{
    convo_load_opts opts = CONVO_LOAD_OPTS_INIT;
    opts.from_seq = INT64_MAX; /* past the end: the extra object and no messages */
    convo_history *h;
    convo_error err;
    int rc = convo_load(s, inv->args[0], &opts, &h, &err);
    if (rc != 0)
        return fail(rc, &err);
    const char *extra = convo_history_extra(h);
    puts(extra ? extra : "{}");
    convo_history_free(h);
    return STATUS_OK;
}

static int cmd_save_extra(convo_store *s, const invocation *inv)
{
    convo_error err;
    char *patch = NULL;
    if (inv->nargs == 1) { /* the patch on stdin: one JSON object, up to the extra limit */
        size_t len;
        int st = read_limited(stdin, CONVO_DEFAULT_MAX_EXTRA_BYTES, 0, 0,
                              "the patch on standard input", &patch, &len);
        if (st != STATUS_OK)
            return st;
        patch[len] = '\0'; /* read_limited leaves room: len <= max < cap */
        if (strlen(patch) != len) {
            free(patch);
            return fail_msg(STATUS_ERROR, "the patch on standard input holds a NUL byte");
        }
    }
    int rc = convo_save_extra(s, inv->args[0], patch ? patch : inv->args[1], &err);
    free(patch);
    return rc ? fail(rc, &err) : STATUS_OK;
}

/* Prints one page of ids; *printed gets their number, *next the cursor or NULL. */
static int print_thread_page(convo_store *s, const char *after, size_t limit, size_t *printed,
                             char **next)
{
    convo_thread_page *p;
    convo_error err;
    *printed = 0;
    *next = NULL; /* the caller frees it, error or not */
    int rc = convo_thread_list(s, after, limit, &p, &err);
    if (rc != 0)
        return fail(rc, &err);
    *printed = convo_thread_page_count(p);
    for (size_t i = 0; i < *printed; i++)
        puts(convo_thread_page_id(p, i));
    const char *n = convo_thread_page_next(p);
    *next = n ? strdup(n) : NULL;
    convo_thread_page_free(p);
    if (n && !*next)
        return fail_msg(STATUS_ERROR, "out of memory");
    return STATUS_OK;
}

static int cmd_threads(convo_store *s, const invocation *inv)
{
    int64_t limit = 0; /* 0: every thread, page by page */
    int st = opt_count(inv, "--limit", &limit);
    const char *after = opt_value(inv, "--after");
    char *cursor = NULL;
    while (st == STATUS_OK) {
        size_t page = limit > 0 && limit < THREAD_PAGE ? (size_t)limit : THREAD_PAGE;
        size_t printed;
        char *next;
        st = print_thread_page(s, cursor ? cursor : after, page, &printed, &next);
        free(cursor);
        cursor = next;
        if (limit > 0 && (limit -= (int64_t)printed) == 0)
            break;
        if (!cursor)
            break;
    }
    free(cursor);
    return st;
}

static int cmd_delete(convo_store *s, const invocation *inv)
{
    convo_error err;
    int rc = convo_thread_delete(s, inv->args[0], &err);
    return rc ? fail(rc, &err) : STATUS_OK;
}

static int cmd_fork(convo_store *s, const invocation *inv)
{
    int64_t upto = -1; /* all messages */
    int st = opt_count(inv, "--upto", &upto);
    if (st != STATUS_OK)
        return st;
    convo_error err;
    int rc = convo_thread_fork(s, inv->args[0], inv->args[1], upto, &err);
    return rc ? fail(rc, &err) : STATUS_OK;
}

static int cmd_export(convo_store *s, const invocation *inv)
{
    return convo_tool_export(s, inv->nargs, inv->args);
}

static int cmd_import(convo_store *s, const invocation *inv)
{
    (void)inv;
    return convo_tool_import(s);
}

/* One checkpoint as a JSON object on one line (values are not printed). */
static int print_checkpoint(const convo_checkpoint *cp)
{
    char at[40];
    convo_format_time(convo_checkpoint_created_at(cp), at, sizeof at);
    json_t *channels = json_object();
    for (size_t i = 0; i < convo_checkpoint_channel_count(cp); i++) {
        const char *version;
        const char *name = convo_checkpoint_channel(cp, i, &version, NULL);
        json_object_set_new(channels, name, json_string(version));
    }
    json_t *meta = json_loads(convo_checkpoint_metadata(cp), 0, NULL);
    const char *parent = convo_checkpoint_parent_id(cp);
    json_t *o = json_pack("{s:s, s:s, s:s, s:o, s:s, s:I, s:o, s:o, s:I}",
                          "thread_id", convo_checkpoint_thread_id(cp),
                          "checkpoint_ns", convo_checkpoint_ns(cp),
                          "checkpoint_id", convo_checkpoint_id(cp),
                          "parent_checkpoint_id", parent ? json_string(parent) : json_null(),
                          "created_at", at,
                          "log_length", (json_int_t)convo_checkpoint_log_length(cp),
                          "metadata", meta ? meta : json_object(),
                          "channel_versions", channels,
                          "pending_writes", (json_int_t)convo_checkpoint_write_count(cp));
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!text)
        return fail_msg(STATUS_ERROR, "out of memory");
    puts(text);
    free(text);
    return STATUS_OK;
}

static int cmd_checkpoints(convo_store *s, const invocation *inv)
{
    int64_t limit = 0;
    int st = opt_count(inv, "--limit", &limit);
    if (st != STATUS_OK)
        return st;
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = inv->args[0];
    o.checkpoint_ns = opt_value(inv, "--ns");
    o.limit = (size_t)limit;
    convo_checkpoint_set *set;
    convo_error err;
    int rc = convo_checkpoint_list(s, &o, &set, &err);
    if (rc != 0)
        return fail(rc, &err);
    if (convo_checkpoint_set_count(set) == 0) {
        /* nothing listed: say not found (3) for a thread that does not exist, as load does */
        convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
        lo.limit = 1;
        lo.with_extra = 0;
        convo_history *h = NULL;
        rc = convo_load(s, o.thread_id, &lo, &h, &err);
        convo_history_free(h);
        if (rc != 0)
            st = fail(rc, &err);
    }
    for (size_t i = 0; i < convo_checkpoint_set_count(set) && st == STATUS_OK; i++)
        st = print_checkpoint(convo_checkpoint_set_get(set, i));
    convo_checkpoint_set_free(set);
    return st;
}

static int cmd_sweep(convo_store *s, const invocation *inv)
{
    (void)inv;
    uint64_t removed;
    convo_error err;
    int rc = convo_sweep(s, &removed, &err);
    if (rc != 0)
        return fail(rc, &err);
    printf("%llu\n", (unsigned long long)removed);
    return STATUS_OK;
}

static int cmd_copy(convo_store *s, const invocation *inv)
{
    (void)s; /* opens its own two stores */
    return convo_tool_copy(inv->args[0], inv->args[1], inv->nargs - 2, inv->args + 2);
}

static int cmd_help(convo_store *s, const invocation *inv)
{
    (void)s;
    if (inv->nargs == 0) {
        print_help(stdout);
        return STATUS_OK;
    }
    const command *c = find_command(inv->args[0]);
    if (!c)
        return usage_error(NULL, "unknown command '%.40s'", inv->args[0]);
    print_usage(stdout, c);
    printf("  %s\n", c->summary);
    return STATUS_OK;
}

/* The command table. A command with `run` gets its arguments parsed and, with
 * opens_store, the store opened; one with `run_raw`
 * (bench) parses its own arguments and opens what it needs. */
static const command commands[] = {
    {.name = "append", .run = cmd_append, .opens_store = 1, .min_args = 1, .max_args = -1,
     .options = {"--idempotency-key=", "--expect-length="},
     .usage = "append THREAD [JSON ...] [--idempotency-key K] [--expect-length N]",
     .summary = "append messages (the JSON arguments, else JSON Lines on stdin) as one\n"
                "    all-or-nothing batch; prints \"FIRST_SEQ COUNT\""},
    {.name = "load", .run = cmd_load, .opens_store = 1, .min_args = 1, .max_args = 1,
     .options = {"--from=", "--limit=", "--tail=", "--with-meta"},
     .usage = "load THREAD [--from SEQ] [--limit N] [--tail N] [--with-meta]",
     .summary = "print the messages, one per line, exactly as appended"},
    {.name = "extra", .run = cmd_extra, .opens_store = 1, .min_args = 1, .max_args = 1,
     .usage = "extra THREAD", .summary = "print the merged extra object"},
    {.name = "save-extra", .run = cmd_save_extra, .opens_store = 1, .min_args = 1, .max_args = 2,
     .usage = "save-extra THREAD [JSON]",
     .summary = "merge the keys of a JSON object (argument, or stdin) into the extra object"},
    {.name = "threads", .run = cmd_threads, .opens_store = 1, .min_args = 0, .max_args = 0,
     .options = {"--after=", "--limit="}, .usage = "threads [--after ID] [--limit N]",
     .summary = "print thread ids in byte order, one per line"},
    {.name = "delete", .run = cmd_delete, .opens_store = 1, .min_args = 1, .max_args = 1,
     .usage = "delete THREAD", .summary = "delete a thread and all it holds"},
    {.name = "fork", .run = cmd_fork, .opens_store = 1, .min_args = 2, .max_args = 2,
     .options = {"--upto="}, .usage = "fork SRC DST [--upto N]",
     .summary = "copy messages [0, N) and the extra object of SRC into the new thread DST"},
    {.name = "checkpoints", .run = cmd_checkpoints, .opens_store = 1, .min_args = 1,
     .max_args = 1, .options = {"--ns=", "--limit="},
     .usage = "checkpoints THREAD [--ns NS] [--limit N]",
     .summary = "list the thread's checkpoints, newest first, one JSON object per line"},
    {.name = "sweep", .run = cmd_sweep, .opens_store = 1, .min_args = 0, .max_args = 0,
     .usage = "sweep", .summary = "remove threads whose ttl has passed; prints how many"},
    {.name = "export", .run = cmd_export, .opens_store = 1, .min_args = 0, .max_args = -1,
     .usage = "export [THREAD ...] > FILE",
     .summary = "write the threads (all by default) as a msgpack dump to stdout"},
    {.name = "import", .run = cmd_import, .opens_store = 1, .min_args = 0, .max_args = 0,
     .usage = "import < FILE", .summary = "store a dump read from stdin (idempotent)"},
    {.name = "copy", .run = cmd_copy, .min_args = 2, .max_args = -1,
     .usage = "copy SRC_URL DST_URL [THREAD ...]",
     .summary = "stream threads from one store into another"},
    {.name = "bench", .run_raw = convo_tool_bench,
     .usage = "bench --scenario append|load|extra|checkpoint|conversation [OPTIONS]",
     .summary = "measure convo against the backend's raw speed (see docs/cli.md)"},
    {.name = "help", .run = cmd_help, .min_args = 0, .max_args = 1, .usage = "help [COMMAND]",
     .summary = "print this help"},
};

static const command *find_command(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static void print_help(FILE *f)
{
    fputs("usage: convo [--url URL] COMMAND [ARGS ...]\n"
          "       convo --help | --version\n\ncommands:\n", f);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %s\n    %s\n", commands[i].usage, commands[i].summary);
    fputs("\nURL defaults to $CONVO_URL, else " DEFAULT_URL ".\n"
          "exit status: 0 ok, 1 error, 2 usage, 3 not found, 4 conflict, 5 too large,\n"
          "  6 stored but the output could not be written\n", f);
}

static void print_version(void)
{
    printf("convo %s\ndrivers:", convo_version());
    for (const char *const *d = convo_drivers(); *d; d++)
        printf(" %s", *d);
    putchar('\n');
}

/* Runs one command: parse its arguments, open the store only once they are valid. */
static int run(const char *url, const command *cmd, int argc, char **argv)
{
    invocation inv = {.cmd = cmd};
    inv.args = calloc((size_t)argc + 1, sizeof *inv.args);
    if (!inv.args)
        return fail_msg(STATUS_ERROR, "out of memory");
    int st = parse_args(&inv, argc, argv);
    if (st == STATUS_HELP) {
        print_usage(stdout, cmd);
        printf("  %s\n", cmd->summary);
        st = STATUS_OK;
        cmd = NULL; /* nothing more to run */
    }
    convo_store *s = NULL;
    convo_error err;
    if (st == STATUS_OK && cmd && cmd->opens_store) {
        int rc = convo_open(&s, url, &err);
        if (rc != 0)
            st = fail(rc, &err);
    }
    if (st == STATUS_OK && cmd)
        st = cmd->run(s, &inv);
    convo_close(s);
    free(inv.args);
    return st;
}

/* A command that failed has said why already (the first error is the root cause). */
static int finish(int status)
{
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (status != STATUS_OK)
            return status;
        fprintf(stderr, "convo: cannot write standard output%s%s\n", errno ? ": " : "",
                errno ? strerror(errno) : "");
        return STATUS_ERROR;
    }
    return status;
}

/* If argv[*k] is --url VALUE or --url=VALUE, sets *url (moving *k past the
 * value) and returns 1; 0 when it is something else; a usage error when the
 * value is missing or a URL was given already. */
static int url_option(int argc, char **argv, int *k, const char **url)
{
    const char *a = argv[*k], *value;
    if (strcmp(a, "--url") == 0) {
        if (*k + 1 >= argc)
            return usage_error(NULL, "option --url needs a value");
        value = argv[++*k];
    } else if (strncmp(a, "--url=", 6) == 0) {
        value = a + 6;
    } else {
        return 0;
    }
    /* an empty value is an unset variable (--url "$URL"), not the default store */
    if (!*value)
        return usage_error(NULL, "option --url needs a value");
    if (*url)
        return usage_error(NULL, "option --url given twice");
    *url = value;
    return 1;
}

/* --url may also follow the command (`convo bench --url URL ...`): it is taken
 * out of argv[from..argc) before the command reads its arguments; "--" ends
 * the search. Returns STATUS_OK or a usage error. */
static int take_url_after_command(int *argc, char **argv, int from, const char **url)
{
    int out = from;
    for (int k = from; k < *argc; k++) {
        if (strcmp(argv[k], "--") == 0) {
            while (k < *argc)
                argv[out++] = argv[k++];
            break;
        }
        int taken = url_option(*argc, argv, &k, url);
        if (taken == STATUS_USAGE)
            return taken;
        if (!taken)
            argv[out++] = argv[k];
    }
    *argc = out;
    argv[out] = NULL;
    return STATUS_OK;
}

/* A closed stdin, stdout or stderr would be taken by the store's first socket
 * (SQLite guards its files, hiredis and libpq do not): the tool would read its
 * input from the server connection and print into it. Each closed one is held
 * by /dev/null opened the other way, so using it still fails with EBADF. */
static void hold_closed_std_fds(void)
{
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
            continue;
        int held = open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY);
        if (held > fd) {
            dup2(held, fd);
            close(held);
        }
    }
}

int main(int argc, char **argv)
{
    const char *url = NULL;
    hold_closed_std_fds();
    int i = 1;
    for (; i < argc && strncmp(argv[i], "-", 1) == 0; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            print_help(stdout);
            return finish(STATUS_OK);
        } else if (strcmp(a, "--version") == 0) {
            print_version();
            return finish(STATUS_OK);
        } else if (strcmp(a, "--") == 0) {
            i++;
            break;
        } else {
            int taken = url_option(argc, argv, &i, &url);
            if (taken == STATUS_USAGE)
                return taken;
            if (!taken)
                return usage_error(NULL, "unknown option '%.40s'", a);
        }
    }
    if (i >= argc)
        return usage_error(NULL, "no command given");
    const command *cmd = find_command(argv[i]);
    if (!cmd)
        return usage_error(NULL, "unknown command '%.40s'", argv[i]);
    int rc = take_url_after_command(&argc, argv, i + 1, &url);
    if (rc != STATUS_OK)
        return finish(rc);
    if (!url)
        url = getenv("CONVO_URL");
    if (!url || !*url)
        url = DEFAULT_URL;
    if (cmd->run_raw)
        return finish(cmd->run_raw(url, argc - i, argv + i));
    return finish(run(url, cmd, argc - i - 1, argv + i + 1));
}
