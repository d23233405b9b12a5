/* The intrusive LRU list (shardmill/lru.h) of the three caches: a doubly linked list of nodes
 * embedded in the cached objects, head the most recent, with the sum, count and peak of the
 * charges of the linked nodes. Invariant: a node is linked exactly when it has a neighbour or is
 * the head (an unlinked node's pointers are NULL), and the list's bytes and count are the sum and
 * number of its linked nodes' charges. Also the caches' one wait for an entry being fetched. */
#include "shardmill/sm_config.h"

#include "shardmill/lru.h"

void sm_lru_push_front(struct sm_lru *l, struct sm_lru_node *n, uint64_t charge)
{
    n->prev = NULL;
    n->next = l->head;
    if (l->head != NULL) {
        l->head->prev = n;
    }
    l->head = n;
    if (l->tail == NULL) {
        l->tail = n;
    }
    n->charge = charge;
    l->bytes += charge;
    l->count++;
    if (l->bytes > l->peak_bytes) {
        l->peak_bytes = l->bytes;
    }
}

/* Takes a linked node out of the chain, leaving the counters alone. */
static void detach(struct sm_lru *l, struct sm_lru_node *n)
{
    if (n->prev != NULL) {
        n->prev->next = n->next;
    } else {
        l->head = n->next;
    }
    if (n->next != NULL) {
        n->next->prev = n->prev;
    } else {
        l->tail = n->prev;
    }
    n->prev = n->next = NULL;
}

bool sm_lru_linked(const struct sm_lru *l, const struct sm_lru_node *n)
{
    return n->prev != NULL || l->head == n;
}

void sm_lru_touch(struct sm_lru *l, struct sm_lru_node *n)
{
    if (l->head == n || !sm_lru_linked(l, n)) {
        return;
    }
    detach(l, n);
    n->next = l->head;
    l->head->prev = n; /* not empty: n was linked and was not the head */
    l->head = n;
}

void sm_lru_unlink(struct sm_lru *l, struct sm_lru_node *n)
{
    if (!sm_lru_linked(l, n)) {
        return;
    }
    detach(l, n);
    l->bytes -= n->charge;
    l->count--;
    n->charge = 0;
}

struct sm_lru_node *sm_lru_oldest(const struct sm_lru *l)
{
    return l->tail;
}

struct sm_lru_node *sm_lru_pop_oldest(struct sm_lru *l)
{
    struct sm_lru_node *n = l->tail;
    if (n != NULL) {
        sm_lru_unlink(l, n);
    }
    return n;
}

struct sm_lru_node *sm_lru_newest(const struct sm_lru *l)
{
    return l->head;
}

struct sm_lru_node *sm_lru_older(const struct sm_lru_node *n)
{
    return n->next;
}

struct sm_lru_node *sm_lru_newer(const struct sm_lru_node *n)
{
    return n->prev;
}

bool sm_lru_over(const struct sm_lru *l, uint64_t charge, uint64_t max_bytes, uint64_t max_count)
{
    return l->bytes + charge > max_bytes || l->count + 1 > max_count;
}

bool sm_lru_fetch_wait(struct sm_lru_fetch *f, pthread_mutex_t *mu, pthread_cond_t *cv)
{
    f->waiters++;
    while (!f->ready) {
        pthread_cond_wait(cv, mu);
    }
    f->waiters--;
    return !f->failed;
}

void sm_lru_fetch_done(struct sm_lru_fetch *f, bool ok, pthread_cond_t *cv)
{
    f->ready = true;
    f->failed = !ok;
    pthread_cond_broadcast(cv);
}
