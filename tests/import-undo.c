/* import-undo.c — convo_import when the store fails under it, through a memory
 * store whose driver table is wrapped (internal API): the error names what the
 * import leaves behind.
 *
 *   tests/import_undo          (run by make check)
 */
#include "internal.h"
#include "dumpbuf.h"
#include <check.h>
#include <stdlib.h>
#include <string.h>

static const convo_driver *memory;

/* Deleting a staged copy (.convo-import-...) fails, as when the server went
 * away right after the fork that published the thread. */
static int staged_delete_fails(convo_backend *b, const char *thread_id, convo_error *err)
{
    if (strncmp(thread_id, ".convo-import-", 14) == 0)
        return convo__error(err, CONVO_EIO, NULL, "server gone");
    return memory->thread_delete(b, thread_id, err);
}

START_TEST(test_staged_copy_left_is_named)
{
    memory = convo__driver_find("memory");
    ck_assert_ptr_nonnull(memory);
    convo_driver wrapped = *memory;
    wrapped.thread_delete = staged_delete_fails;
    convo_store *s = NULL;
    convo_error err;
    ck_assert_int_eq(convo_open(&s, "memory:", &err), 0);
    s->driver = &wrapped;
    membuf dump = dump_with_time("a", 1700000000000);
    dump.pos = 0;
    int rc = convo_import(s, mem_read, &dump, NULL, NULL, &err);
    ck_assert_int_eq(rc, CONVO_EIO);
    /* the thread was published whole; its staged copy is left and named */
    ck_assert_msg(strstr(err.message, "server gone") &&
                      strstr(err.message, "could not be removed: delete it") &&
                      strstr(err.message, ".convo-import-"),
                  "the leftover copy is not named: %s", err.message);
    convo_history *h = NULL;
    ck_assert_int_eq(convo_load(s, "a", NULL, &h, &err), 0);
    ck_assert_uint_eq(convo_history_count(h), 1);
    convo_history_free(h);
    s->driver = memory;
    convo_close(s);
    free(dump.data);
}
END_TEST

int main(void)
{
    Suite *suite = suite_create("import undo");
    TCase *tc = tcase_create("store failures");
    tcase_add_test(tc, test_staged_copy_left_is_named);
    suite_add_tcase(suite, tc);
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
