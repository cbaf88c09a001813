/*
 * janitor.h — the service's background upkeep (DESIGN §4.5): expire
 * sessions whose lease ran out, resolve abandoned locks, collect garbage.
 */
#ifndef PC_JANITOR_H
#define PC_JANITOR_H

#include "service.h"

typedef struct janitor janitor;

janitor *janitor_start(svc *s);
void janitor_stop(janitor *j);

#endif
