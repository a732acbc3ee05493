/* cli.c — what every command of the tool shares: exit statuses from library
 * codes, one-line errors and usage, the option parser, and reading JSON Lines
 * (or one object) from standard input within the limits of one call. */
#include "cli.h"
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
int fail(int code, const convo_error *err)
{
    const char *msg = err && err->message[0] ? err->message : convo_strerror(code);
    fprintf(stderr, "convo: %s\n", msg);
    return status_for(code);
}

int fail_msg(int status, const char *fmt, ...)
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
void print_usage(FILE *f, const command *cmd)
{
    int url = cmd->opens_store || cmd->run_raw;
    fprintf(f, "usage: convo %s%s\n", url ? "[--url URL] " : "", cmd->usage);
}

int usage_error(const command *cmd, const char *fmt, ...)
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

const char *opt_value(const invocation *inv, const char *name)
{
    size_t len = strlen(name);
    for (int i = 0; i < inv->nopts; i++)
        if (strncmp(inv->opt_spec[i], name, len) == 0 && strcspn(inv->opt_spec[i], "=") == len)
            return inv->opt_value[i];
    return NULL;
}

/* Reads a non-negative integer option strictly (digits only, no overflow);
 * leaves *out untouched when the option is absent. */
int opt_count(const invocation *inv, const char *name, int64_t *out)
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
int parse_args(invocation *inv, int argc, char **argv)
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

void batch_free(batch *b)
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
int read_limited(FILE *in, size_t max_total, size_t max_line, size_t max_lines,
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
int read_lines(FILE *in, batch *b, int allow_empty)
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
    if (b->n == 0 && !allow_empty)
        return fail_msg(STATUS_ERROR, "no messages to append: standard input has no JSON lines");
    return STATUS_OK;
}

/* The core names a rejected message of a batch "message I: ..." (0-based) or,
 * for a batch of one, "message ...". Say which line or argument it was instead. */
void name_rejected_message(convo_error *err, const batch *b, int from_stdin)
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
