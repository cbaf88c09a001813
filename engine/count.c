/*
 * count.c — rows per table, by a full scan in one snapshot. For tests and
 * operators (GC's effect is "fewer write rows"), never on a hot path.
 */
#include "internal.h"

static pc_rc count_cursor(pc_session *s, WT_CURSOR *c, uint64_t *n)
{
    int ret;

    *n = 0;
    while ((ret = c->next(c)) == 0)
        (*n)++;
    return ret == WT_NOTFOUND ? PC_OK : pc_wt_error(s, ret, "cursor next");
}

static pc_rc count_body(pc_session *s, void *arg)
{
    pc_table_counts *c = arg;
    pc_rc rc;

    if ((rc = count_cursor(s, s->data, &c->data)) != PC_OK ||
        (rc = count_cursor(s, s->lock, &c->lock)) != PC_OK ||
        (rc = count_cursor(s, s->write, &c->write)) != PC_OK)
        return rc;
    return count_cursor(s, s->notify, &c->notify);
}

pc_rc pc_count_rows(pc_session *s, pc_table_counts *c)
{
    if (c == NULL)
        return PC_INVALID;
    return pc_run_txn(s, count_body, c);
}
