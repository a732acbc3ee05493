/* dump_seeds.c — writes the seed corpus of fuzz_dump: convo_export of small
 * memory: stores (messages, extra, checkpoints with channel values and pending
 * writes), plus a truncated dump. Run by `tests/fuzz.sh --seeds`. */
#include <convo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void must(int rc, const convo_error *err, const char *what)
{
    if (rc != 0) {
        fprintf(stderr, "dump_seeds: %s: %s\n", what, err->message);
        exit(1);
    }
}

static int to_file(void *ctx, const void *buf, size_t len)
{
    return fwrite(buf, 1, len, ctx) == len ? 0 : -1;
}

static void export_to(convo_store *s, const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    convo_error err;
    if (!f) {
        perror(path);
        exit(1);
    }
    must(convo_export(s, NULL, 0, to_file, f, NULL, NULL, &err), &err, name);
    fclose(f);
}

static void append(convo_store *s, const char *tid, const char *const *msgs, size_t n)
{
    convo_error err;
    must(convo_append(s, tid, msgs, NULL, n, NULL, NULL, &err), &err, "append");
}

static void checkpoints(convo_store *s, const char *tid)
{
    convo_error err;
    convo_blob v1 = {"json", "[1,2]", 5}, v2 = {"msgpack", "\x92\x01\x02", 3};
    convo_channel_in ch1[] = {{"messages", "1", &v1}, {"step", "1", &v2}};
    convo_channel_in ch2[] = {{"messages", "1", NULL}, {"step", "2", &v1}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = tid;
    cp.checkpoint_id = "cp-1";
    cp.metadata_json = "{\"source\":\"loop\",\"step\":1}";
    cp.body = (convo_blob){"json", "{\"v\":1}", 7};
    cp.channels = ch1;
    cp.nchannels = 2;
    cp.log_length = 2;
    must(convo_checkpoint_put(s, &cp, &err), &err, "checkpoint 1");
    cp.checkpoint_id = "cp-2";
    cp.parent_id = "cp-1";
    cp.checkpoint_ns = "sub";
    cp.channels = ch2;
    cp.body = (convo_blob){NULL, NULL, 0};
    must(convo_checkpoint_put(s, &cp, &err), &err, "checkpoint 2");
    convo_write_in w[] = {{0, "messages", {"json", "\"hi\"", 4}}, {-1, "__error__", {"bytes", "x", 1}}};
    must(convo_checkpoint_put_writes(s, tid, "sub", "cp-2", "task-a", "path/a", w, 2, &err), &err,
         "writes");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    convo_store *s;
    convo_error err;
    must(convo_open(&s, "memory:", &err), &err, "open");
    export_to(s, dir, "empty");

    const char *m[] = {"{\"role\":\"user\",\"content\":\"hi\"}",
                       "{\"role\" : \"assistant\", \"content\":\"h\\u00e9 \xe2\x9c\x93\"}",
                       "{\"role\":\"tool_result\",\"tool_call_id\":\"c1\",\"content\":\"6\"}"};
    append(s, "t1", m, 3);
    must(convo_save_extra(s, "t1", "{\"title\":\"greeting\",\"$k.x\":null}", &err), &err, "extra");
    export_to(s, dir, "one-thread");

    checkpoints(s, "t1");
    must(convo_save_extra(s, "only-extra", "{}", &err), &err, "extra-only");
    append(s, "t\xc3\xa9/2", m, 2);
    export_to(s, dir, "checkpoints");

    /* a truncated copy: the reader's error path */
    char path[4096], cut[4096];
    snprintf(path, sizeof path, "%s/checkpoints", dir);
    snprintf(cut, sizeof cut, "%s/truncated", dir);
    FILE *in = fopen(path, "rb"), *out = fopen(cut, "wb");
    char buf[65536];
    size_t n = in ? fread(buf, 1, sizeof buf, in) : 0;
    if (!out || fwrite(buf, 1, n / 2, out) != n / 2)
        return 1;
    fclose(in);
    fclose(out);
    convo_close(s);
    return 0;
}
