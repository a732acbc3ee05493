/* cli.h — what the tool's commands share (tools/cli.c): exit statuses, the
 * command table's types, one-line errors, options, reading stdin. */
#ifndef CONVO_TOOL_CLI_H
#define CONVO_TOOL_CLI_H

#include <convo.h>
#include <stdint.h>
#include <stdio.h>

#if defined(__GNUC__)
#define TOOL_PRINTF(fmt, first) __attribute__((format(printf, fmt, first)))
#else
#define TOOL_PRINTF(fmt, first)
#endif

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

#define MAX_OPTIONS 8

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

/* ---- errors and usage ---- */
/* Prints the library's one-line message and returns the exit status of its code. */
int fail(int code, const convo_error *err);
int fail_msg(int status, const char *fmt, ...) TOOL_PRINTF(2, 3);
void print_usage(FILE *f, const command *cmd);
/* Prints the error and the command's usage (cmd NULL: the tool's); returns STATUS_USAGE. */
int usage_error(const command *cmd, const char *fmt, ...) TOOL_PRINTF(2, 3);

/* ---- options ---- */
/* The value of an option given ("" for a flag), or NULL when absent. */
const char *opt_value(const invocation *inv, const char *name);
/* A non-negative integer option into *out (untouched when absent); else a usage error. */
int opt_count(const invocation *inv, const char *name, int64_t *out);
/* Splits argv into options and positional arguments; STATUS_HELP for --help. */
int parse_args(invocation *inv, int argc, char **argv);

/* ---- standard input ---- */
typedef struct batch {
    char *buf;          /* all of stdin */
    const char **msgs;  /* pointers into buf */
    size_t *lens;
    size_t *line_no;    /* 1-based line of each message, for error messages */
    size_t n;
} batch;

void batch_free(batch *b);
/* Reads at most max_total bytes (0 = no limit), lines of at most max_line bytes
 * and at most max_lines non-blank lines; *out gets a buffer with room for a NUL. */
int read_limited(FILE *in, size_t max_total, size_t max_line, size_t max_lines,
                 const char *what, char **out, size_t *len);
/* One message per non-blank line of in; none is an error unless allow_empty. */
int read_lines(FILE *in, batch *b, int allow_empty);
/* Rewrites the core's "message I: ..." to name the line or JSON argument. */
void name_rejected_message(convo_error *err, const batch *b, int from_stdin);

#endif
