/* SPDX-License-Identifier: Apache-2.0 */
/* tests/comm_scenarios.h: the communicator test scenarios, shared by the threads test
 * (tests/test_comm_threads.c, 1..8 ranks as threads) and the MPI test (tests/mpi/test_comm_mpi.c,
 * 2..4 processes), so that both backends pass the very same suite.
 *
 * A scenario runs on every rank and returns MM_OK, or the first failed expectation as an error
 * message (the test's main then reports it per rank). Scenarios do not use the CHECK macros, whose
 * counters are not thread-safe. Expectations are independent of the code under test: bytes are a hash
 * of (source, destination, position, iteration), counts are closed formulas, reductions are compared
 * with sums in closed form. Every scenario sets its own timeout, so a bug fails fast and never hangs. */
#ifndef MEGAMOE_TESTS_COMM_SCENARIOS_H
#define MEGAMOE_TESTS_COMM_SCENARIOS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "megamoe/comm.h"
#include "testlib.h"

/* A collective call that must succeed. */
#define SCEN_OK(err, call)                                                                                   \
    do {                                                                                                     \
        mm_error e_ = {MM_OK, ""};                                                                           \
        mm_status s_ = (call);                                                                               \
        if (s_ != MM_OK) SCEN_FAIL(err, "%s returned %s: %s", #call, mm_status_name(s_), e_.message);        \
    } while (0)

/* What a validating operator does on a bad input: fill its error record, return the status. */
static inline mm_status mm_fail_for_test(mm_error *e, const char *message) {
    snprintf(e->message, sizeof e->message, "%s", message);
    e->status = MM_ERR_INVALID_ARGUMENT;
    return MM_ERR_INVALID_ARGUMENT;
}

static inline uint8_t scen_byte(int src, int dst, size_t i, int iter) {
    uint64_t z = (uint64_t)src * 0x9E3779B97F4A7C15ull ^ (uint64_t)dst * 0xBF58476D1CE4E5B9ull ^
                 (uint64_t)i * 0x94D049BB133111EBull ^ (uint64_t)iter * 0x2545F4914F6CDD1Dull;
    z ^= z >> 29;
    z *= 0xBF58476D1CE4E5B9ull;
    return (uint8_t)(z >> 56);
}

enum { SCEN_EMPTY, SCEN_UNIFORM, SCEN_SKEWED, SCEN_ONE_HOT, SCEN_ROWS, SCEN_PATTERNS };
static const char *const scen_pattern_names[SCEN_PATTERNS] = {"empty", "uniform", "skewed", "one-hot",
                                                              "rows"};

/* Bytes rank src sends to rank dst. */
static inline size_t scen_count(int pattern, int src, int dst, int iter) {
    switch (pattern) {
    case SCEN_EMPTY: return 0;
    case SCEN_UNIFORM: return 64;
    case SCEN_SKEWED: return (size_t)((src * 7 + dst * 13 + iter) % 6) * 37; /* zeros included */
    case SCEN_ONE_HOT: return dst == 0 ? 1000 + (size_t)src : 0;             /* everybody to rank 0 */
    default: return (size_t)(1 + (src + dst + iter) % 3) * 7168 * 2;         /* BF16 rows of H = 7168 */
    }
}

#define SCEN_GAP      8 /* sentinel bytes between receive blocks: an overrun shows up there */
#define SCEN_SENTINEL 0xA5

/* One alltoallv with the given pattern; checks every received byte and every gap. Ranks that are not
 * alive get a bogus count (which must be ignored) and their block must stay untouched. */
static mm_status scen_alltoallv_once(mm_comm *c, int pattern, int iter, mm_error *err) {
    const int me = mm_comm_rank(c), n = mm_comm_size(c);
    size_t sc[MM_COMM_MAX_RANKS], sd[MM_COMM_MAX_RANKS], rc[MM_COMM_MAX_RANKS], rd[MM_COMM_MAX_RANKS];
    size_t send_total = 0, recv_total = 0;
    for (int p = n - 1; p >= 0; p--) { /* send blocks in reverse order: displacements must be honoured */
        sc[p] = mm_comm_is_alive(c, p) ? scen_count(pattern, me, p, iter) : 999;
        sd[p] = send_total;
        send_total += mm_comm_is_alive(c, p) ? sc[p] : 0;
    }
    for (int p = 0; p < n; p++) {
        rc[p] = mm_comm_is_alive(c, p) ? scen_count(pattern, p, me, iter) : 999;
        rd[p] = recv_total;
        recv_total += (mm_comm_is_alive(c, p) ? rc[p] : 0) + SCEN_GAP;
    }
    uint8_t *send = malloc(send_total + 1), *recv = malloc(recv_total + 1);
    if (!send || !recv) {
        free(send);
        free(recv);
        SCEN_FAIL(err, "no memory");
    }
    for (int p = 0; p < n; p++)
        if (mm_comm_is_alive(c, p))
            for (size_t i = 0; i < sc[p]; i++) send[sd[p] + i] = scen_byte(me, p, i, iter);
    memset(recv, SCEN_SENTINEL, recv_total + 1);
    mm_error e = {MM_OK, ""};
    mm_status st = mm_comm_alltoallv(c, send, sc, sd, recv, rc, rd, &e);
    int bad_peer = -1;
    size_t bad_at = 0;
    for (int p = 0; p < n && st == MM_OK && bad_peer < 0; p++) {
        size_t got = mm_comm_is_alive(c, p) ? rc[p] : 0;
        for (size_t i = 0; i < got + SCEN_GAP; i++) {
            uint8_t want = i < got ? scen_byte(p, me, i, iter) : SCEN_SENTINEL;
            if (recv[rd[p] + i] != want) {
                bad_peer = p;
                bad_at = i;
                break;
            }
        }
    }
    free(send);
    free(recv);
    if (st != MM_OK)
        SCEN_FAIL(err, "alltoallv (%s, iteration %d) returned %s: %s", scen_pattern_names[pattern], iter,
                  mm_status_name(st), e.message);
    SCEN_EXPECT(err, bad_peer < 0,
                "alltoallv (%s, iteration %d): byte %zu of the block from rank %d is wrong",
                scen_pattern_names[pattern], iter, bad_at, bad_peer);
    return MM_OK;
}

/* Every traffic pattern, many times over the same communicator (state reused across calls). */
static mm_status scen_alltoallv(mm_comm *c, mm_error *err) {
    SCEN_OK(err, mm_comm_set_timeout(c, 20.0, &e_));
    for (int iter = 0; iter < 40; iter++) {
        mm_status st = scen_alltoallv_once(c, iter % SCEN_PATTERNS, iter, err);
        if (st) return st;
    }
    return MM_OK;
}

static mm_status scen_barrier_allgather_allreduce(mm_comm *c, mm_error *err) {
    const int me = mm_comm_rank(c), n = mm_comm_size(c);
    SCEN_OK(err, mm_comm_set_timeout(c, 20.0, &e_));
    SCEN_EXPECT(err, me >= 0 && me < n, "rank %d outside [0, %d)", me, n);
    for (int i = 0; i < 200; i++) SCEN_OK(err, mm_comm_barrier(c, &e_));

    int64_t mine[3] = {me, 1000 + me, -7 * me};
    int64_t all[MM_COMM_MAX_RANKS * 3];
    for (int iter = 0; iter < 20; iter++) {
        mine[2] = -7 * me - iter;
        SCEN_OK(err, mm_comm_allgather(c, mine, sizeof mine, all, &e_));
        for (int p = 0; p < n; p++)
            SCEN_EXPECT(err, all[3 * p] == p && all[3 * p + 1] == 1000 + p && all[3 * p + 2] == -7 * p - iter,
                        "allgather block of rank %d is (%lld, %lld, %lld)", p, (long long)all[3 * p],
                        (long long)all[3 * p + 1], (long long)all[3 * p + 2]);
    }

    int64_t v[3] = {me + 1, me + 1, me + 1};
    SCEN_OK(err, mm_comm_allreduce_i64(c, v, 1, MM_REDUCE_SUM, &e_));
    SCEN_EXPECT(err, v[0] == (int64_t)n * (n + 1) / 2, "allreduce sum = %lld, expected %lld", (long long)v[0],
                (long long)n * (n + 1) / 2);
    v[0] = 10 - me;
    v[1] = me * me;
    SCEN_OK(err, mm_comm_allreduce_i64(c, v, 2, MM_REDUCE_MIN, &e_));
    SCEN_EXPECT(err, v[0] == 10 - (n - 1) && v[1] == 0, "allreduce min = (%lld, %lld)", (long long)v[0],
                (long long)v[1]);
    v[0] = 10 - me;
    v[1] = me * me;
    SCEN_OK(err, mm_comm_allreduce_i64(c, v, 2, MM_REDUCE_MAX, &e_));
    SCEN_EXPECT(err, v[0] == 10 && v[1] == (int64_t)(n - 1) * (n - 1), "allreduce max = (%lld, %lld)",
                (long long)v[0], (long long)v[1]);

    /* Doubles: every rank must get the bits of the sum taken in ascending rank order. */
    double d = 0.1 * (me + 1), expect = 0;
    for (int p = 0; p < n; p++) expect = p == 0 ? 0.1 : expect + 0.1 * (p + 1);
    SCEN_OK(err, mm_comm_allreduce_f64(c, &d, 1, MM_REDUCE_SUM, &e_));
    SCEN_EXPECT(err, memcmp(&d, &expect, sizeof d) == 0, "allreduce f64 sum = %.17g, expected %.17g", d,
                expect);
    double dmax = me == n - 1 ? INFINITY : (double)me;
    SCEN_OK(err, mm_comm_allreduce_f64(c, &dmax, 1, MM_REDUCE_MAX, &e_));
    SCEN_EXPECT(err, isinf(dmax), "allreduce f64 max = %g, expected inf", dmax);

    /* An invalid argument is refused before any communication. */
    mm_error e = {MM_OK, ""};
    SCEN_EXPECT(err,
                mm_comm_allreduce_i64(c, v, 0, MM_REDUCE_SUM, &e) == MM_ERR_INVALID_ARGUMENT &&
                    strstr(e.message, "n = 0 is outside [1, 64]"),
                "allreduce with n = 0 gave \"%s\"", e.message);
    return MM_OK;
}

/* An error found by one rank becomes everyone's result; the lowest failing rank's message wins. */
static mm_status scen_agree(mm_comm *c, mm_error *err) {
    const int me = mm_comm_rank(c), n = mm_comm_size(c);
    SCEN_OK(err, mm_comm_set_timeout(c, 20.0, &e_));
    mm_error e = {MM_OK, ""};
    SCEN_EXPECT(err, mm_comm_agree(c, MM_OK, &e) == MM_OK, "agree of all-ok gave %s", e.message);

    mm_status local = MM_OK;
    if (me == n - 1) local = mm_fail_for_test(&e, "expert_token_num_per_rank[1][0] = -3 is negative");
    mm_status st = mm_comm_agree(c, local, &e);
    char want[160];
    snprintf(want, sizeof want, "rank %d: expert_token_num_per_rank[1][0] = -3 is negative", n - 1);
    SCEN_EXPECT(err, st == MM_ERR_INVALID_ARGUMENT && strcmp(e.message, want) == 0,
                "agree gave %s \"%s\", expected invalid_argument \"%s\"", mm_status_name(st), e.message,
                want);

    /* Two failing ranks: the lowest one's status and message. */
    e = (mm_error){MM_OK, ""};
    local = MM_OK;
    if (me == n - 1) local = mm_fail_for_test(&e, "late");
    if (me == n / 2 && n > 1) {
        snprintf(e.message, sizeof e.message, "x[%d] is NaN", me);
        e.status = local = MM_ERR_IO;
    }
    st = mm_comm_agree(c, local, &e);
    int lowest = n > 1 ? n / 2 : 0;
    if (n > 1)
        snprintf(want, sizeof want, "rank %d: x[%d] is NaN", lowest, lowest);
    else
        snprintf(want, sizeof want, "rank 0: late");
    SCEN_EXPECT(err, st == (n > 1 ? MM_ERR_IO : MM_ERR_INVALID_ARGUMENT) && strcmp(e.message, want) == 0,
                "agree of two failures gave %s \"%s\", expected \"%s\"", mm_status_name(st), e.message, want);

    /* A count mismatch in alltoallv fails on the receiver; agree makes it the result everywhere. */
    if (n >= 2) {
        size_t sc[MM_COMM_MAX_RANKS] = {0}, sd[MM_COMM_MAX_RANKS] = {0};
        size_t rc[MM_COMM_MAX_RANKS] = {0}, rd[MM_COMM_MAX_RANKS] = {0};
        char sbuf[8] = "abcd", rbuf[8] = {0};
        if (me == 1) sc[0] = 4;
        if (me == 0) rc[1] = 5;
        st = mm_comm_alltoallv(c, sbuf, sc, sd, rbuf, rc, rd, &e);
        if (me == 0)
            SCEN_EXPECT(err,
                        st == MM_ERR_INVALID_ARGUMENT &&
                            strstr(e.message, "rank 1 sends 4 bytes to rank 0 but "
                                              "recv_counts[1] = 5"),
                        "mismatched alltoallv on the receiver gave %s \"%s\"", mm_status_name(st), e.message);
        st = mm_comm_agree(c, st, &e);
        SCEN_EXPECT(err, st == MM_ERR_INVALID_ARGUMENT && strstr(e.message, "rank 0: "),
                    "agree after a mismatched alltoallv gave %s \"%s\"", mm_status_name(st), e.message);
    }
    return MM_OK;
}

/* Symmetric buffer: many rounds of put + signal + wait, reusing the buffer and its counters. */
static mm_status scen_symm(mm_comm *c, mm_error *err) {
    const int me = mm_comm_rank(c), n = mm_comm_size(c);
    SCEN_OK(err, mm_comm_set_timeout(c, 20.0, &e_));
    const size_t block = 1000;
    mm_symm *s = NULL;
    SCEN_OK(err, mm_symm_alloc(c, (size_t)n * block, &s, &e_));
    SCEN_EXPECT(err, mm_symm_size(s) == (size_t)n * block, "symm size %zu", mm_symm_size(s));
    uint8_t *local = mm_symm_local(s);
    for (size_t i = 0; i < (size_t)n * block; i++)
        SCEN_EXPECT(err, local[i] == 0, "fresh buffer byte %zu is not 0", i);
    for (int p = 0; p < n; p++)
        SCEN_EXPECT(err, mm_symm_signal_value(s, p) == 0, "fresh signal from %d is not 0", p);
    SCEN_OK(err, mm_comm_barrier(c, &e_)); /* everybody has looked before anybody writes */
    uint8_t src[1000];
    mm_status result = MM_OK;
    for (int iter = 0; iter < 30 && result == MM_OK; iter++) {
        for (int k = 0; k < n; k++) {
            int p = (me + k) % n;
            size_t len =
                (iter % 3 == 2 && p == 0) ? 0 : block - (size_t)((me + iter) % 5); /* one-hot gaps too */
            for (size_t i = 0; i < len; i++) src[i] = scen_byte(me, p, i, iter);
            uint8_t *direct = mm_symm_peer_ptr(s, p);
            if (direct && iter % 2)
                memcpy(direct + (size_t)me * block, src, len); /* store through the pointer */
            else
                SCEN_OK(err, mm_symm_put(s, p, (size_t)me * block, src, len, &e_));
            SCEN_OK(err, mm_symm_signal(s, p, 1, &e_));
        }
        SCEN_OK(err, mm_symm_wait_all(s, (uint64_t)iter + 1, &e_));
        for (int p = 0; p < n; p++) {
            size_t len = (iter % 3 == 2 && me == 0) ? 0 : block - (size_t)((p + iter) % 5);
            SCEN_EXPECT(err, mm_symm_signal_value(s, p) == (uint64_t)iter + 1,
                        "signal from %d = %llu at iteration %d", p,
                        (unsigned long long)mm_symm_signal_value(s, p), iter);
            for (size_t i = 0; i < len; i++)
                SCEN_EXPECT(err, local[(size_t)p * block + i] == scen_byte(p, me, i, iter),
                            "iteration %d: byte %zu from rank %d is wrong", iter, i, p);
        }
        /* Nobody may write the next round into my buffer before I have read this one. */
        SCEN_OK(err, mm_comm_barrier(c, &e_));
    }
    mm_error e = {MM_OK, ""};
    SCEN_EXPECT(err,
                mm_symm_put(s, 0, (size_t)n * block - 4, src, 8, &e) == MM_ERR_INVALID_ARGUMENT &&
                    strstr(e.message, "exceeds the buffer size"),
                "out-of-bounds put gave \"%s\"", e.message);
    SCEN_EXPECT(err, mm_symm_put(s, n, 0, src, 1, &e) == MM_ERR_INVALID_ARGUMENT, "put to rank %d accepted",
                n);
    SCEN_OK(err, mm_symm_free(s, &e_));

    /* Sizes that differ across ranks fail on every rank (a peer's put could pass the end of a smaller
     * part), naming the range; nothing is allocated and the communicator stays usable. */
    mm_symm *odd = NULL;
    size_t ask = me == n - 1 ? 128 : 64;
    mm_status st = mm_symm_alloc(c, ask, &odd, &e);
    if (n == 1) {
        SCEN_EXPECT(err, st == MM_OK, "one rank, one size: symm_alloc gave \"%s\"", e.message);
        SCEN_OK(err, mm_symm_free(odd, &e_));
    } else {
        char want[160];
        snprintf(want, sizeof want,
                 "symm_alloc of %zu bytes: the ranks asked for 64 to 128 bytes (a symmetric buffer has the "
                 "same size on every rank)",
                 ask);
        SCEN_EXPECT(err, st == MM_ERR_INVALID_ARGUMENT && odd == NULL && strcmp(e.message, want) == 0,
                    "sizes 64 / 128: symm_alloc gave %s \"%s\", expected \"%s\"", mm_status_name(st),
                    e.message, want);
    }
    SCEN_OK(err, mm_comm_barrier(c, &e_));
    return MM_OK;
}

/* Sub-groups: domains of consecutive ranks and EP x TP pairs; collectives work inside them. */
static mm_status scen_split(mm_comm *c, mm_error *err) {
    const int me = mm_comm_rank(c), n = mm_comm_size(c);
    SCEN_OK(err, mm_comm_set_timeout(c, 20.0, &e_));
    int per = n % 2 == 0 ? 2 : 1;
    mm_comm *dom = NULL, *tp = NULL, *node = NULL;
    SCEN_OK(err, mm_comm_split_domains(c, per, &dom, &e_));
    SCEN_EXPECT(err, mm_comm_rank(dom) == me % per && mm_comm_size(dom) == per, "domain rank %d size %d",
                mm_comm_rank(dom), mm_comm_size(dom));
    /* Reverse key order inside the "TP" groups: rank order follows the key. */
    SCEN_OK(err, mm_comm_split(c, me % per, n - me, &tp, &e_));
    int tp_size = n / per;
    SCEN_EXPECT(err, mm_comm_size(tp) == tp_size && mm_comm_rank(tp) == tp_size - 1 - me / per,
                "split by key: rank %d size %d", mm_comm_rank(tp), mm_comm_size(tp));
    int64_t v = me;
    SCEN_OK(err, mm_comm_allreduce_i64(dom, &v, 1, MM_REDUCE_SUM, &e_));
    int64_t want = 0;
    for (int r = me / per * per; r < me / per * per + per; r++) want += r;
    SCEN_EXPECT(err, v == want, "sum inside the domain = %lld, expected %lld", (long long)v, (long long)want);
    mm_status st = scen_alltoallv_once(tp, SCEN_SKEWED, 3, err);
    if (st) return st;
    SCEN_OK(err, mm_comm_split_node(c, &node, &e_));
    SCEN_EXPECT(err, mm_comm_size(node) >= 1 && mm_comm_size(node) <= n, "node size %d", mm_comm_size(node));
    SCEN_OK(err, mm_comm_barrier(node, &e_));
    SCEN_OK(err, mm_comm_free(node, &e_));
    SCEN_OK(err, mm_comm_free(tp, &e_));
    SCEN_OK(err, mm_comm_free(dom, &e_));

    mm_error e = {MM_OK, ""};
    mm_comm *bad = NULL;
    st = mm_comm_split(c, me == n - 1 ? -1 : 0, 0, &bad, &e);
    char msg[96];
    snprintf(msg, sizeof msg, "rank %d passed color = -1, which is negative", n - 1);
    SCEN_EXPECT(err, st == MM_ERR_INVALID_ARGUMENT && strstr(e.message, msg) && bad == NULL,
                "split with a negative color on one rank gave %s \"%s\"", mm_status_name(st), e.message);
    return MM_OK;
}

/* The last rank never arrives: everyone else times out naming it, the communicator is poisoned, the
 * survivors are declared and go on (barrier, alltoallv, a buffer allocated before the removal). The
 * caller makes the last rank skip everything and return. */
static mm_status scen_survivors(mm_comm *c, mm_error *err) {
    const int me = mm_comm_rank(c), n = mm_comm_size(c);
    SCEN_OK(err, mm_comm_set_timeout(c, 20.0, &e_));
    mm_symm *s = NULL;
    SCEN_OK(err, mm_symm_alloc(c, 64 * (size_t)n, &s, &e_));
    SCEN_OK(err, mm_comm_barrier(c, &e_));
    if (me == n - 1) return MM_OK; /* this rank "dies" */

    SCEN_OK(err, mm_comm_set_timeout(c, 0.2, &e_));
    mm_error e = {MM_OK, ""};
    mm_status st = mm_comm_barrier(c, &e);
    char want[96];
    snprintf(want, sizeof want, "barrier: rank %d did not arrive within 0.2 s", n - 1);
    SCEN_EXPECT(err, st == MM_ERR_TIMEOUT && strcmp(e.message, want) == 0,
                "barrier gave %s \"%s\", expected \"%s\"", mm_status_name(st), e.message, want);
    /* Poisoned: fails at once, pointing at the earlier failure. */
    st = mm_comm_alltoallv(c, NULL, (size_t[MM_COMM_MAX_RANKS]){0}, (size_t[MM_COMM_MAX_RANKS]){0}, NULL,
                           (size_t[MM_COMM_MAX_RANKS]){0}, (size_t[MM_COMM_MAX_RANKS]){0}, &e);
    SCEN_EXPECT(err, st == MM_ERR_PEER && strstr(e.message, want), "call after the timeout gave %s \"%s\"",
                mm_status_name(st), e.message);

    int alive[MM_COMM_MAX_RANKS];
    for (int r = 0; r < n - 1; r++) alive[r] = r;
    SCEN_OK(err, mm_comm_set_survivors(c, alive, n - 1, &e_));
    SCEN_EXPECT(err, mm_comm_alive_count(c) == n - 1 && !mm_comm_is_alive(c, n - 1), "alive count %d",
                mm_comm_alive_count(c));
    SCEN_OK(err, mm_comm_set_timeout(c, 20.0, &e_));
    for (int i = 0; i < 20; i++) SCEN_OK(err, mm_comm_barrier(c, &e_));
    for (int iter = 0; iter < 10; iter++) {
        st = scen_alltoallv_once(c, iter % SCEN_PATTERNS, iter, err);
        if (st) return st;
    }
    int64_t v = 1;
    SCEN_OK(err, mm_comm_allreduce_i64(c, &v, 1, MM_REDUCE_SUM, &e_));
    SCEN_EXPECT(err, v == n - 1, "survivors' sum = %lld, expected %d", (long long)v, n - 1);
    mm_status agreed = mm_comm_agree(c, MM_OK, &e);
    SCEN_EXPECT(err, agreed == MM_OK, "survivors' agree gave \"%s\"", e.message);

    /* The buffer allocated before the removal still works among survivors. */
    for (int p = 0; p < n - 1; p++) {
        uint64_t word = 0x1000u * (uint64_t)me + (uint64_t)p;
        SCEN_OK(err, mm_symm_put(s, p, 64 * (size_t)me, &word, sizeof word, &e_));
        SCEN_OK(err, mm_symm_signal(s, p, 5, &e_));
    }
    SCEN_OK(err, mm_symm_wait_all(s, 5, &e_));
    const uint64_t *words = mm_symm_local(s);
    for (int p = 0; p < n - 1; p++)
        SCEN_EXPECT(err, words[8 * p] == 0x1000u * (uint64_t)p + (uint64_t)me, "word from rank %d = 0x%llx",
                    p, (unsigned long long)words[8 * p]);
    SCEN_EXPECT(err,
                mm_symm_put(s, n - 1, 0, words, 8, &e) == MM_ERR_INVALID_ARGUMENT &&
                    strstr(e.message, "was removed"),
                "put to a removed rank gave \"%s\"", e.message);
    /* A signal that never comes: the wait names the sender. */
    SCEN_OK(err, mm_comm_set_timeout(c, 0.1, &e_));
    st = mm_symm_wait(s, 0, 1000, &e);
    SCEN_EXPECT(err, st == MM_ERR_TIMEOUT && strstr(e.message, "rank 0 did not arrive within 0.1 s"),
                "wait for a signal that never comes gave %s \"%s\"", mm_status_name(st), e.message);
    SCEN_OK(err, mm_comm_set_survivors(c, alive, n - 1, &e_));
    SCEN_OK(err, mm_comm_set_timeout(c, 20.0, &e_));
    SCEN_OK(err, mm_comm_barrier(c, &e_));
    SCEN_OK(err, mm_symm_free(s, &e_));
    return MM_OK;
}

typedef struct scen_entry {
    const char *name;
    mm_status (*fn)(mm_comm *c, mm_error *err);
    int min_ranks;
} scen_entry;

static const scen_entry scen_all[] = {
    {"barrier_allgather_allreduce", scen_barrier_allgather_allreduce, 1},
    {"alltoallv", scen_alltoallv, 1},
    {"agree", scen_agree, 1},
    {"symm", scen_symm, 1},
    {"split", scen_split, 1},
    {"survivors", scen_survivors, 2},
};
#define SCEN_COUNT (sizeof scen_all / sizeof scen_all[0])

/* A launcher's rank function running the scen_entry given as its argument. */
static inline mm_status scen_run_entry(mm_comm *c, void *arg, mm_error *err) {
    const scen_entry *entry = arg;
    return entry->fn(c, err);
}

/* ---- rank functions of the launchers' result-rule tests (test_comm_threads.c, test_world.c) ---- */

/* Rank 1 fails, the others succeed: the launcher reports each rank and the lowest failure. */
static inline mm_status fail_on_some(mm_comm *c, void *arg, mm_error *err) {
    (void)arg;
    if (mm_comm_rank(c) == 1) return mm_fail_for_test(err, "topk 9 exceeds moe_expert_num 8");
    if (mm_comm_rank(c) == 3) {
        snprintf(err->message, sizeof err->message, "disk full");
        return MM_ERR_IO;
    }
    return MM_OK;
}

/* Rank 2 finds an error and every rank agrees on it (mm_comm_agree prefixes "rank 2: "). */
static inline mm_status agreed_failure(mm_comm *c, void *arg, mm_error *err) {
    (void)arg;
    mm_status local = MM_OK;
    if (mm_comm_rank(c) == 2) local = mm_fail_for_test(err, "hidden = 30 is not a multiple of 32");
    return mm_comm_agree(c, local, err);
}

#endif
