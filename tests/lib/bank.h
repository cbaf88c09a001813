/*
 * bank.h — the bank-transfer client two tests share (test_service_bank:
 * snapshot isolation under contention; test_service_crash: atomicity under
 * kill -9): move an amount between two account keys whose values are
 * decimal balances, as one transaction.
 */
#ifndef PC_TL_BANK_H
#define PC_TL_BANK_H

#include <stdbool.h>

#include "svc_fixture.h"

typedef struct {
    long status;          /* of the last request made (0: no answer) */
    bool committing;      /* the last request was the commit: its status is
                             the transfer's outcome; else an earlier step
                             failed and nothing was committed */
} tl_transfer;

/* The balance in a read item {"key","value":"<decimal>",...} (0 if none). */
long tl_bank_balance(json_t *item);

/* Transfer up to `amount` (never more than from's balance) from key a to
 * key b, also writing key marker (NULL: none) in the same transaction.
 * session: begin, read both (batch), write (batch), commit; else read both
 * through /v1/txn, then a compare-and-set /v1/txn on both commit_ts. */
tl_transfer tl_bank_transfer(tl_stack *st, bool session, const char *a, const char *b,
                             long amount, const char *marker);

#endif
