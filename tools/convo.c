/* convo.c — the command-line tool: append, load, inspect, fork and delete
 * conversation threads in any store libconvo opens by URL. It uses only the
 * public header <convo.h>, and jansson to quote roles in `load --with-meta`. */
#include "bench.h"
#include "cli.h"
#include "dump.h"
#include "newdb.h"
#include "rewrite.h"
#include "threads.h"
#include <convo.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_URL "sqlite:convo.db"

/* The extra keys the store indexes, from --index-key K (repeatable): handed to
 * convo_open_ex, which records them in the store the first time. */
#define MAX_INDEX_KEYS 32
static const char *index_keys[MAX_INDEX_KEYS + 1];
static int nindex_keys;

static const command *find_command(const char *name);
static void print_help(FILE *f);

/* ---- commands ---- */

static int cmd_append(convo_store *s, const invocation *inv)
{
    convo_append_opts opts = CONVO_APPEND_OPTS_INIT;
    opts.idempotency_key = opt_value(inv, "--idempotency-key");
    int st = opt_count(inv, "--expect-length", &opts.expected_length);
    if (st == STATUS_OK)
        st = opt_count(inv, "--expect-generation", &opts.expected_generation);
    if (st != STATUS_OK)
        return st;
    batch b = {0};
    int from_stdin = inv->nargs == 1;
    if (from_stdin) {
        if ((st = read_lines(stdin, &b, 0)) != STATUS_OK) {
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

/* {"seq":N,"generation":G,"created_at":"...","role":"...","message":<stored bytes>} */
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
    printf("{\"seq\":%lld,\"generation\":%lld,\"created_at\":\"%s\",\"role\":%s,"
           "\"message\":", (long long)convo_history_seq(h, i),
           (long long)convo_history_generation(h), when, quoted);
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

static int cmd_delete(convo_store *s, const invocation *inv)
{
    convo_error err;
    int rc = convo_thread_delete(s, inv->args[0], &err);
    return rc ? fail(rc, &err) : STATUS_OK;
}

static int cmd_fork(convo_store *s, const invocation *inv)
{
    int64_t upto = -1; /* all messages */
    convo_fork_opts fo = CONVO_FORK_OPTS_INIT;
    int st = opt_count(inv, "--upto", &upto);
    if (st == STATUS_OK)
        st = opt_count(inv, "--expect-generation", &fo.expected_generation);
    if (st != STATUS_OK)
        return st;
    fo.with_checkpoints = opt_value(inv, "--with-checkpoints") != NULL;
    convo_error err;
    int rc = convo_thread_fork_ex(s, inv->args[0], inv->args[1], upto, &fo, &err);
    return rc ? fail(rc, &err) : STATUS_OK;
}

static int cmd_export(convo_store *s, const invocation *inv)
{
    return convo_tool_export(s, inv->nargs, inv->args, opt_value(inv, "--quiet") != NULL);
}

static int cmd_import(convo_store *s, const invocation *inv)
{
    return convo_tool_import(s, opt_value(inv, "--quiet") != NULL);
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
    return convo_tool_copy(inv->args[0], inv->args[1], inv->nargs - 2, inv->args + 2,
                           opt_value(inv, "--quiet") != NULL);
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
     .options = {"--idempotency-key=", "--expect-length=", "--expect-generation="},
     .usage = "append THREAD [JSON ...] [--idempotency-key K] [--expect-length N]\n"
              "      [--expect-generation G]",
     .summary = "append messages (the JSON arguments, else JSON Lines on stdin) as one\n"
                "    all-or-nothing batch; prints \"FIRST_SEQ COUNT\""},
    {.name = "load", .run = cmd_load, .opens_store = 1, .min_args = 1, .max_args = 1,
     .options = {"--from=", "--limit=", "--tail=", "--with-meta"},
     .usage = "load THREAD [--from SEQ] [--limit N] [--tail N] [--with-meta]",
     .summary = "print the messages, one per line, exactly as appended"},
    {.name = "pop", .run = convo_tool_pop, .opens_store = 1, .min_args = 1, .max_args = 1,
     .options = {"--count=", "--expect-length=", "--drop-checkpoints"},
     .usage = "pop THREAD [--count N] [--expect-length N] [--drop-checkpoints]",
     .summary = "remove the last N messages (default 1) and print them, one per line"},
    {.name = "replace-tail", .run = convo_tool_replace_tail, .opens_store = 1, .min_args = 1,
     .max_args = -1,
     .options = {"--keep=", "--expect-length=", "--expect-generation=", "--idempotency-key=",
                 "--drop-checkpoints"},
     .usage = "replace-tail THREAD --keep N [JSON ...] [--expect-length N]\n"
              "      [--expect-generation G] [--idempotency-key K] [--drop-checkpoints]",
     .summary = "keep messages [0, N) and store the new ones (JSON arguments, else JSON\n"
                "    Lines on stdin) after them, atomically; prints \"FIRST_SEQ COUNT GENERATION\""},
    {.name = "extra", .run = cmd_extra, .opens_store = 1, .min_args = 1, .max_args = 1,
     .usage = "extra THREAD", .summary = "print the merged extra object"},
    {.name = "save-extra", .run = cmd_save_extra, .opens_store = 1, .min_args = 1, .max_args = 2,
     .usage = "save-extra THREAD [JSON]",
     .summary = "merge the keys of a JSON object (argument, or stdin) into the extra object"},
    {.name = "threads", .run = convo_tool_threads, .opens_store = 1, .min_args = 0,
     .max_args = 0,
     .options = {"--after=", "--limit=", "--where=", "--order=", "--reverse", "--with-meta",
                 "--extra", "--last-message"},
     .usage = "threads [--after ID] [--limit N]\n"
              "      threads [--where JSON] [--order recent|created|id] [--reverse] [--with-meta\n"
              "      [--extra] [--last-message]] [--after CURSOR] [--limit N]",
     .summary = "print thread ids in byte order, one per line; with the index options, the\n"
                "    threads whose extra contains JSON, newest activity first (--with-meta: one\n"
                "    JSON object per thread: id, times, length, cursor, extra, last message)"},
    {.name = "delete", .run = cmd_delete, .opens_store = 1, .min_args = 1, .max_args = 1,
     .usage = "delete THREAD", .summary = "delete a thread and all it holds"},
    {.name = "fork", .run = cmd_fork, .opens_store = 1, .min_args = 2, .max_args = 2,
     .options = {"--upto=", "--expect-generation=", "--with-checkpoints"},
     .usage = "fork SRC DST [--upto N] [--expect-generation G] [--with-checkpoints]",
     .summary = "copy messages [0, N) and the extra object of SRC into the new thread DST\n"
                "    (--with-checkpoints: and every checkpoint within them, with its values and\n"
                "    pending writes: LangGraph's copy_thread)"},
    {.name = "checkpoints", .run = cmd_checkpoints, .opens_store = 1, .min_args = 1,
     .max_args = 1, .options = {"--ns=", "--limit="},
     .usage = "checkpoints THREAD [--ns NS] [--limit N]",
     .summary = "list the thread's checkpoints, newest first, one JSON object per line"},
    {.name = "sweep", .run = cmd_sweep, .opens_store = 1, .min_args = 0, .max_args = 0,
     .usage = "sweep", .summary = "remove threads whose ttl has passed; prints how many"},
    {.name = "export", .run = cmd_export, .opens_store = 1, .min_args = 0, .max_args = -1,
     .options = {"--quiet"}, .usage = "export [THREAD ...] [--quiet] > FILE",
     .summary = "write the threads (all by default) as a msgpack dump to stdout; a summary\n"
                "    line on stderr (--quiet: none)"},
    {.name = "import", .run = cmd_import, .opens_store = 1, .min_args = 0, .max_args = 0,
     .options = {"--quiet"}, .usage = "import [--quiet] < FILE",
     .summary = "store a dump read from stdin (idempotent); a summary line on stderr"},
    {.name = "copy", .run = cmd_copy, .min_args = 2, .max_args = -1, .options = {"--quiet"},
     .usage = "copy SRC_URL DST_URL [THREAD ...] [--quiet]",
     .summary = "stream threads from one store into another; a summary line on stderr"},
    {.name = "bench", .run_raw = convo_tool_bench,
     .usage = "bench --scenario append|load|extra|checkpoint|pop|conversation|threads [OPTIONS]",
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
    fputs("usage: convo [--url URL] [--index-key KEY ...] COMMAND [ARGS ...]\n"
          "       convo --help | --version\n\ncommands:\n", f);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %s\n    %s\n", commands[i].usage, commands[i].summary);
    fputs("\nURL defaults to $CONVO_URL, else " DEFAULT_URL ".\n"
          "--index-key KEY (repeatable): an extra key the thread index keeps an index for,\n"
          "  recorded in the store by the first command that names it.\n"
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
    char *created = NULL; /* a SQLite file this open creates */
    if (st == STATUS_OK && cmd && cmd->opens_store) {
        created = newdb_path(url);
        convo_store_opts opts = CONVO_STORE_OPTS_INIT;
        opts.indexed_keys = nindex_keys > 0 ? index_keys : NULL;
        int rc = convo_open_ex(&s, url, &opts, &err);
        if (rc != 0)
            st = fail(rc, &err);
    }
    if (st == STATUS_OK && cmd)
        st = cmd->run(s, &inv);
    if (st != STATUS_OK && st != STATUS_STORED_NO_OUTPUT)
        newdb_discard(created, &s);
    free(created);
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

/* As url_option, for --index-key KEY / --index-key=KEY. */
static int index_key_option(int argc, char **argv, int *k)
{
    const char *a = argv[*k], *value;
    if (strcmp(a, "--index-key") == 0) {
        if (*k + 1 >= argc)
            return usage_error(NULL, "option --index-key needs a value");
        value = argv[++*k];
    } else if (strncmp(a, "--index-key=", 12) == 0) {
        value = a + 12;
    } else {
        return 0;
    }
    if (!*value)
        return usage_error(NULL, "option --index-key needs a value");
    if (nindex_keys == MAX_INDEX_KEYS)
        return usage_error(NULL, "at most %d --index-key options", MAX_INDEX_KEYS);
    index_keys[nindex_keys++] = value;
    return 1;
}

/* --url or --index-key at argv[*k]: 1 when taken, 0 when something else, or a usage error. */
static int global_option(int argc, char **argv, int *k, const char **url)
{
    int taken = url_option(argc, argv, k, url);
    return taken ? taken : index_key_option(argc, argv, k);
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
        int taken = global_option(*argc, argv, &k, url);
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
            int taken = global_option(argc, argv, &i, &url);
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
    if (nindex_keys > 0 && !cmd->opens_store)
        return usage_error(cmd, "--index-key applies to the commands that open one store, "
                           "not %s", cmd->name);
    if (cmd->run_raw)
        return finish(cmd->run_raw(url, argc - i, argv + i));
    return finish(run(url, cmd, argc - i - 1, argv + i + 1));
}
