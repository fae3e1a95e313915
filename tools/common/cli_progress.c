/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/cli_progress.c: the progress line of the long phases (see cli_progress.h). A thread
 * redraws it every 0.1 s because the phases run inside library calls that report nothing while they
 * work; the thread waits on a condition variable so that cli_progress_end returns at once. */
#include "common/cli_progress.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "common/timing.h"

static struct {
    int quiet, active, stop;
    char label[160];
    double begin;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
} progress = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

void cli_progress_quiet(void) {
    progress.quiet = 1;
}

static void draw(void) {
    fprintf(stderr, "\r%s %.1f s ", progress.label, cli_now_seconds() - progress.begin);
    fflush(stderr);
}

static void *ticker(void *arg) {
    (void)arg;
    pthread_mutex_lock(&progress.lock);
    while (!progress.stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100 * 1000 * 1000;
        if (until.tv_nsec >= 1000 * 1000 * 1000) until.tv_sec++, until.tv_nsec -= 1000 * 1000 * 1000;
        pthread_cond_timedwait(&progress.wake, &progress.lock, &until);
        if (!progress.stop) draw();
    }
    pthread_mutex_unlock(&progress.lock);
    return NULL;
}

void cli_progress_begin(const char *fmt, ...) {
    if (progress.quiet || progress.active || !isatty(STDERR_FILENO)) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(progress.label, sizeof progress.label, fmt, ap);
    va_end(ap);
    progress.begin = cli_now_seconds();
    progress.stop = 0;
    draw();
    if (pthread_create(&progress.thread, NULL, ticker, NULL) == 0) progress.active = 1;
}

void cli_progress_end(void) {
    if (!progress.active) return;
    pthread_mutex_lock(&progress.lock);
    progress.stop = 1;
    pthread_cond_signal(&progress.wake);
    pthread_mutex_unlock(&progress.lock);
    pthread_join(progress.thread, NULL);
    progress.active = 0;
    fputs("\r\033[K", stderr); /* erase the line: the table row or the next phase takes its place */
    fflush(stderr);
}
